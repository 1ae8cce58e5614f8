/*
 * icuuc_stub.c - a stand-in for Windows' own icuuc.dll (System32, Windows 10 1703 and
 * later), for the wine prefix that builds Ember.exe on Linux
 * (packaging/build_windows_under_wine.sh). Never shipped: it sits in the prefix's
 * C:\windows\system32, where PyInstaller treats DLLs as the system's and leaves them out.
 *
 * Why: Qt 6.7+ links Qt6Core.dll to the system ICU for its legacy text codecs
 * (QStringConverter by name: the 20 ucnv_* functions below), and wine 8 has no icuuc.dll, so
 * `import PySide6.QtCore` fails with "DLL load failed ... Module not found" (wine:
 * "Library icuuc.dll (which is needed by ...Qt6Core.dll) not found").
 *
 * What it does: every converter is unavailable (ucnv_open fails with U_FILE_ACCESS_ERROR,
 * none are listed), so Qt keeps to its built-in UTF-8/16/32 and Latin-1 codecs, which are
 * all Ember uses. The other entry points are never reached without an open converter.
 */
#include <stdint.h>

#define EXPORT __declspec(dllexport)

typedef int32_t UErrorCode;
typedef uint16_t UChar;
typedef int8_t UBool;
typedef void UConverter;
typedef void (*UConverterCallback)(void);

enum { U_FILE_ACCESS_ERROR = 4, U_ILLEGAL_ARGUMENT_ERROR = 1 };

static void fail(UErrorCode *err, UErrorCode code) {
    if (err && *err <= 0) *err = code;
}

EXPORT UConverter *ucnv_open(const char *name, UErrorCode *err) {
    (void)name;
    fail(err, U_FILE_ACCESS_ERROR);
    return 0;
}
EXPORT void ucnv_close(UConverter *cnv) { (void)cnv; }
EXPORT void ucnv_reset(UConverter *cnv) { (void)cnv; }
EXPORT int8_t ucnv_getMaxCharSize(const UConverter *cnv) { (void)cnv; return 1; }
EXPORT const char *ucnv_getName(const UConverter *cnv, UErrorCode *err) {
    (void)cnv;
    fail(err, U_ILLEGAL_ARGUMENT_ERROR);
    return 0;
}
EXPORT void ucnv_getToUCallBack(const UConverter *cnv, UConverterCallback *action,
                                const void **context) {
    (void)cnv;
    if (action) *action = 0;
    if (context) *context = 0;
}
EXPORT void ucnv_getFromUCallBack(const UConverter *cnv, UConverterCallback *action,
                                  const void **context) {
    ucnv_getToUCallBack(cnv, action, context);
}
EXPORT void ucnv_setToUCallBack(UConverter *cnv, UConverterCallback action, const void *context,
                                UConverterCallback *old_action, const void **old_context,
                                UErrorCode *err) {
    (void)cnv, (void)action, (void)context;
    ucnv_getToUCallBack(0, old_action, old_context);
    fail(err, U_ILLEGAL_ARGUMENT_ERROR);
}
EXPORT void ucnv_setFromUCallBack(UConverter *cnv, UConverterCallback action, const void *context,
                                  UConverterCallback *old_action, const void **old_context,
                                  UErrorCode *err) {
    ucnv_setToUCallBack(cnv, action, context, old_action, old_context, err);
}
EXPORT void UCNV_TO_U_CALLBACK_SUBSTITUTE(void) {}
EXPORT void UCNV_FROM_U_CALLBACK_SUBSTITUTE(void) {}
EXPORT void ucnv_cbToUWriteUChars(void *args, const UChar *source, int32_t length,
                                  int32_t offset_index, UErrorCode *err) {
    (void)args, (void)source, (void)length, (void)offset_index;
    fail(err, U_ILLEGAL_ARGUMENT_ERROR);
}
EXPORT void ucnv_cbFromUWriteUChars(void *args, const UChar **source, const UChar *limit,
                                    int32_t offset_index, UErrorCode *err) {
    (void)args, (void)source, (void)limit, (void)offset_index;
    fail(err, U_ILLEGAL_ARGUMENT_ERROR);
}
EXPORT void ucnv_toUnicode(UConverter *cnv, UChar **target, const UChar *target_limit,
                           const char **source, const char *source_limit, int32_t *offsets,
                           UBool flush, UErrorCode *err) {
    (void)cnv, (void)target, (void)target_limit, (void)source, (void)source_limit;
    (void)offsets, (void)flush;
    fail(err, U_ILLEGAL_ARGUMENT_ERROR);
}
EXPORT void ucnv_fromUnicode(UConverter *cnv, char **target, const char *target_limit,
                             const UChar **source, const UChar *source_limit, int32_t *offsets,
                             UBool flush, UErrorCode *err) {
    (void)cnv, (void)target, (void)target_limit, (void)source, (void)source_limit;
    (void)offsets, (void)flush;
    fail(err, U_ILLEGAL_ARGUMENT_ERROR);
}
EXPORT int32_t ucnv_toUCountPending(const UConverter *cnv, UErrorCode *err) {
    (void)cnv;
    fail(err, U_ILLEGAL_ARGUMENT_ERROR);
    return 0;
}
EXPORT int32_t ucnv_fromUCountPending(const UConverter *cnv, UErrorCode *err) {
    return ucnv_toUCountPending(cnv, err);
}
EXPORT const char *ucnv_getStandardName(const char *name, const char *standard,
                                        UErrorCode *err) {
    (void)name, (void)standard, (void)err;
    return 0;
}
EXPORT int32_t ucnv_countAvailable(void) { return 0; }
EXPORT const char *ucnv_getAvailableName(int32_t n) { (void)n; return 0; }
