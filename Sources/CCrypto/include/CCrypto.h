#ifndef CCRYPTO_H
#define CCRYPTO_H
#include <stddef.h>

// Thin wrappers so Swift sees plain functions (EVP_MD_CTX is opaque and some helpers are macros).
typedef struct CCryptoDigest CCryptoDigest;
// kind: 0 = MD5, 1 = SHA-256
CCryptoDigest *CCrypto_digest_new(int kind);
void CCrypto_digest_update(CCryptoDigest *d, const void *data, size_t len);
// Writes the digest into out (at least 32 bytes); returns its length and frees d.
int CCrypto_digest_final(CCryptoDigest *d, unsigned char *out);
void CCrypto_digest_free(CCryptoDigest *d);


#include <stdint.h>
// CRC-32C (Castagnoli) continuing from `crc` (0 to start); uses the SSE4.2 instruction when the
// CPU has it, so that checking a download costs far less than receiving it.
uint32_t CCrypto_crc32c(uint32_t crc, const void *data, size_t len);
// The CRC of A followed by B, given both CRCs and CCrypto_crc32c_shift(length of B).
uint32_t CCrypto_crc32c_shift(uint64_t len);
uint32_t CCrypto_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint32_t shift_b);

// RS256 with a PEM key. sign: `out` holds at least 512 bytes, `*out_len` its size on entry and
// the signature's length on return. Both return 0 on success, -1 for a key that cannot be read,
// -2 for a key that is not RSA, -3 for a failed signature or verification.
int CCrypto_rs256_sign(const char *pem, size_t pem_len, const void *data, size_t len, unsigned char *out,
                       size_t *out_len);
int CCrypto_rs256_verify(const char *pem, size_t pem_len, const void *data, size_t len, const unsigned char *sig,
                         size_t sig_len);
#endif
