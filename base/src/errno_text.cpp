#include "uvhost/base/errno_text.h"

#include <cstring>

namespace uvhost::base {

std::string errno_message(int error_number) {
  char buffer[256];
  // The GNU strerror_r returns the text, which may or may not be in BUFFER.
  const char* text = strerror_r(error_number, buffer, sizeof buffer);
  return text;
}

std::string errno_text(std::string_view what, int error_number) {
  std::string text(what);
  text += ": ";
  text += errno_message(error_number);
  return text;
}

}  // namespace uvhost::base
