#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/core_names.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

static inline void push_openssl_free(void *pointer) { OPENSSL_free(pointer); }

#include <openssl/params.h>

/* A P-256 public key from its 65-byte uncompressed point. Importing through
   EVP_PKEY_fromdata checks that the point lies on the curve and costs a fifth of
   d2i_PUBKEY, which runs OpenSSL 3's decoder machinery. */
static inline EVP_PKEY *push_p256_public_key(const unsigned char *point, size_t length) {
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (context == NULL) return NULL;
    EVP_PKEY *key = NULL;
    OSSL_PARAM params[3];
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)"prime256v1", 0);
    params[1] = OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (void *)point, length);
    params[2] = OSSL_PARAM_construct_end();
    if (EVP_PKEY_fromdata_init(context) != 1 || EVP_PKEY_fromdata(context, &key, EVP_PKEY_PUBLIC_KEY, params) != 1) key = NULL;
    EVP_PKEY_CTX_free(context);
    return key;
}

/* SHA-256 with its context on the stack: EVP_Digest (and OpenSSL 3's one-shot SHA256(), a
   wrapper of it) allocates a context and fetches the algorithm under a lock on every call, and the
   APNs plugin derives an apns-id for every delivery. The low-level functions are deprecated, not
   removed, in OpenSSL 3. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static inline void push_sha256(const unsigned char *data, size_t length, unsigned char *digest) {
    SHA256_CTX context;
    SHA256_Init(&context);
    SHA256_Update(&context, data, length);
    SHA256_Final(digest, &context);
}
#pragma GCC diagnostic pop
