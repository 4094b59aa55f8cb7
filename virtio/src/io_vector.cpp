// io_vector.cpp - copying across IoPiece lists.
#include "uvhost/virtio/io_vector.h"

#include <algorithm>
#include <cstring>

namespace uvhost::virtio {

IoVector::IoVector(const IoVector& other) : max_pieces_(other.max_pieces_) { *this = other; }

IoVector& IoVector::operator=(const IoVector& other) {
  if (this == &other) return *this;
  max_pieces_ = other.max_pieces_;
  if (capacity_ < other.size_) {
    data_ = std::make_unique<IoPiece[]>(other.size_);
    capacity_ = other.size_;
  }
  std::copy(other.data_.get(), other.data_.get() + other.size_, data_.get());
  size_ = other.size_;
  total_bytes_ = other.total_bytes_;
  return *this;
}

bool IoVector::grow() {
  if (capacity_ >= max_pieces_) return false;
  const size_t capacity = std::min(max_pieces_, std::max<size_t>(4, 2 * capacity_));
  auto data = std::make_unique<IoPiece[]>(capacity);
  std::copy(data_.get(), data_.get() + size_, data.get());
  data_ = std::move(data);
  capacity_ = capacity;
  return true;
}

}  // namespace uvhost::virtio
