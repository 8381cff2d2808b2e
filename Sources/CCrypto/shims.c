#include <stdlib.h>
#include <openssl/evp.h>
#include "CCrypto.h"

struct CCryptoDigest { EVP_MD_CTX *ctx; };

CCryptoDigest *CCrypto_digest_new(int kind) {
  CCryptoDigest *d = malloc(sizeof(CCryptoDigest));
  d->ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(d->ctx, kind == 0 ? EVP_md5() : EVP_sha256(), NULL);
  return d;
}
void CCrypto_digest_update(CCryptoDigest *d, const void *data, size_t len) {
  EVP_DigestUpdate(d->ctx, data, len);
}
int CCrypto_digest_final(CCryptoDigest *d, unsigned char *out) {
  unsigned int len = 0;
  EVP_DigestFinal_ex(d->ctx, out, &len);
  CCrypto_digest_free(d);
  return (int)len;
}
void CCrypto_digest_free(CCryptoDigest *d) {
  EVP_MD_CTX_free(d->ctx);
  free(d);
}
