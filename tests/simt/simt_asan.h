/* simt_asan.h (tests/simt): SIMT_ASAN is defined when AddressSanitizer
 * instruments this file (gcc's __SANITIZE_ADDRESS__, clang's
 * __has_feature), for C and C++ alike. */
#ifndef HEXI_SIMT_ASAN_H
#define HEXI_SIMT_ASAN_H
#if defined(__SANITIZE_ADDRESS__)
#define SIMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIMT_ASAN 1
#endif
#endif
#endif
