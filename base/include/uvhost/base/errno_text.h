// errno_text.h - the text of a failed system call, for error messages and logs.
//
// Contract:
//  - errno_text(what) gives "WHAT: <strerror(errno)>", reading errno at the call: call
//    it before anything else that may change errno.
//  - errno_text(what, error_number) names an error number kept from earlier.
//  - Thread-safe (strerror_r into a local buffer).
#pragma once

#include <cerrno>
#include <string>
#include <string_view>

namespace uvhost::base {

// "WHAT: TEXT" for ERROR_NUMBER (default: the current errno).
std::string errno_text(std::string_view what, int error_number = errno);

// Only the text of ERROR_NUMBER, as strerror gives it.
std::string errno_message(int error_number);

}  // namespace uvhost::base
