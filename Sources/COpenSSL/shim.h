#include <string.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/ecdh.h>
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

/* HMAC-SHA-256 (RFC 2104) on the same stack contexts: OpenSSL 3's HMAC() fetches the MAC and the
   digest on every call, and RFC 8291 derives a Web Push message's keys with five of them. */
static inline void push_hmac_sha256(const unsigned char *key, size_t key_length, const unsigned char *data,
                                    size_t length, unsigned char *mac) {
    unsigned char block[64] = {0}, pad[64], inner[32];
    if (key_length > sizeof block) push_sha256(key, key_length, block);
    else memcpy(block, key, key_length);
    SHA256_CTX context;
    for (size_t i = 0; i < sizeof pad; i++) pad[i] = block[i] ^ 0x36;
    SHA256_Init(&context);
    SHA256_Update(&context, pad, sizeof pad);
    SHA256_Update(&context, data, length);
    SHA256_Final(inner, &context);
    for (size_t i = 0; i < sizeof pad; i++) pad[i] = block[i] ^ 0x5c;
    SHA256_Init(&context);
    SHA256_Update(&context, pad, sizeof pad);
    SHA256_Update(&context, inner, sizeof inner);
    SHA256_Final(mac, &context);
    OPENSSL_cleanse(block, sizeof block);
    OPENSSL_cleanse(pad, sizeof pad);
}

/* RFC 8291's key agreement for one message: a fresh P-256 key pair, its public point (65 bytes,
   uncompressed) and the ECDH secret (32 bytes) with the subscription's point, through the low-level
   EC API on `group`, the caller's P-256 group made once: building the group for each key would take
   91 of the 144 allocations and a quarter of the time. Through EVP the same steps also fetch their
   algorithms and import and export every key as parameters. EC_POINT_oct2point refuses a point that
   is not on the curve; P-256 has cofactor 1, so that is the whole public-key check. Returns 1 on
   success. */
static inline int push_p256_ephemeral_agreement(const EC_GROUP *group, const unsigned char *peer, size_t peer_length,
                                                unsigned char *public_point, unsigned char *secret) {
    int ok = 0;
    EC_POINT *point = NULL;
    EC_KEY *key = EC_KEY_new();
    if (key == NULL || EC_KEY_set_group(key, group) != 1 || EC_KEY_generate_key(key) != 1) goto done;
    if (EC_POINT_point2oct(group, EC_KEY_get0_public_key(key), POINT_CONVERSION_UNCOMPRESSED, public_point, 65, NULL) != 65)
        goto done;
    point = EC_POINT_new(group);
    if (point == NULL || EC_POINT_oct2point(group, point, peer, peer_length, NULL) != 1) goto done;
    ok = ECDH_compute_key(secret, 32, point, key, NULL) == 32;
done:
    EC_POINT_free(point);
    EC_KEY_free(key);
    return ok;
}
#pragma GCC diagnostic pop
