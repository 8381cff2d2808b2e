// RS256 (RSASSA-PKCS1-v1_5 over SHA-256) signing and verification with OpenSSL's EVP API, for
// the JWT bearer grant: the client signs with a service account's private key, the emulator
// verifies with the matching public key. Keys are PEM text; nothing is cached.
#include "CCrypto.h"
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <string.h>

static EVP_PKEY *read_private(const char *pem, size_t len) {
  BIO *bio = BIO_new_mem_buf(pem, (int)len);
  if (!bio) return NULL;
  EVP_PKEY *key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
  BIO_free(bio);
  return key;
}

static EVP_PKEY *read_public(const char *pem, size_t len) {
  BIO *bio = BIO_new_mem_buf(pem, (int)len);
  if (!bio) return NULL;
  EVP_PKEY *key = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
  BIO_free(bio);
  if (key) return key;
  // A private key (a service account's key file) also gives its public half.
  return read_private(pem, len);
}

int CCrypto_rs256_sign(const char *pem, size_t pem_len, const void *data, size_t len, unsigned char *out,
                       size_t *out_len) {
  EVP_PKEY *key = read_private(pem, pem_len);
  if (!key) return -1;
  if (EVP_PKEY_base_id(key) != EVP_PKEY_RSA) {
    EVP_PKEY_free(key);
    return -2;
  }
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = ctx && EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) == 1 &&
           EVP_DigestSign(ctx, out, out_len, data, len) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  return ok ? 0 : -3;
}

int CCrypto_rs256_verify(const char *pem, size_t pem_len, const void *data, size_t len, const unsigned char *sig,
                         size_t sig_len) {
  EVP_PKEY *key = read_public(pem, pem_len);
  if (!key) return -1;
  if (EVP_PKEY_base_id(key) != EVP_PKEY_RSA) {
    EVP_PKEY_free(key);
    return -2;
  }
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = ctx && EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, key) == 1 &&
           EVP_DigestVerify(ctx, sig, sig_len, data, len) == 1;
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  return ok ? 0 : -3;
}
