// sanitized_build.h - kSanitized: true when this test binary is built with ASan or TSan.
//
// Tests that hand a lock between more threads than cores scale their iteration counts
// down with it: under TSan every atomic access is intercepted, so a fair queue lock's
// handover to a preempted waiter costs a scheduler tick and the same loop runs ~100x
// longer, while the property checked (mutual exclusion, no lost wakeup) needs far
// fewer rounds to be exercised.
#pragma once

namespace uvhost::sync::testing_support {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace uvhost::sync::testing_support
