// libarchive converts names between a tar's UTF-8 (pax) and the calling thread's locale.
// sqar never sets a locale, so it runs in "C", where every non-ASCII name fails to convert:
// libarchive then warns ("can't be converted ... to current locale") though it keeps the
// bytes. Image names are bytes, in practice UTF-8, so the threads that read or write tar
// streams switch to C.UTF-8 for as long as an object of this type lives; names that are not
// UTF-8 still pass byte for byte (hdrcharset=BINARY).
#pragma once
#include <locale.h>

namespace sqar {

class ThreadUtf8Locale {
 public:
  ThreadUtf8Locale() : utf8_(newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t(0))) {
    if (utf8_) previous_ = uselocale(utf8_);
  }
  ~ThreadUtf8Locale() {
    if (!utf8_) return;
    uselocale(previous_);
    freelocale(utf8_);
  }
  ThreadUtf8Locale(const ThreadUtf8Locale&) = delete;
  ThreadUtf8Locale& operator=(const ThreadUtf8Locale&) = delete;

 private:
  locale_t utf8_;
  locale_t previous_ = locale_t(0);
};

}  // namespace sqar
