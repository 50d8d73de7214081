/*
 * The proxy's seal, natively: AES-256-GCM of a record's canonical bytes and SHA-256 of the same
 * bytes, answered as the envelope's base64url fields and the hex digest (core's
 * `sealBytesToText`, envelope.ts, makes exactly these bytes with Node's cipher; a test holds the
 * two equal). Why native: a record of a proxied call is 0.3-2 KB, and for inputs that small the
 * price of Node's cipher is its set-up, not the encryption (a Cipheriv object and stream, an
 * OpenSSL context and key schedule per record, three output Buffers, three base64 passes: warm,
 * 12-14 us a record of 0.35-1.4 KB against 3.5-6.6 here, hash included). This keeps one OpenSSL
 * context per derived key, re-initialised with only a fresh IV per record, and writes the
 * ciphertext and its encodings into scratch buffers of its own, not into JavaScript objects.
 *
 * It links against the OpenSSL that Node itself carries (its headers ship with Node's), so the
 * algorithms and the random generator are Node's own (`crypto.randomBytes` is `RAND_bytes`).
 */
#include <node_api.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Inputs above this go back to the portable path (core seals them with WebCrypto anyway). */
#define MAX_PLAINTEXT (64 * 1024)
#define MAX_AAD 512

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/* Two base64url characters per 12 bits, so the loop does two lookups per 3 bytes. */
static uint16_t PAIRS[4096];

static void init_pairs(void) {
  for (int i = 0; i < 4096; i++) {
    unsigned char pair[2] = {(unsigned char)B64URL[i >> 6], (unsigned char)B64URL[i & 63]};
    memcpy(&PAIRS[i], pair, 2);
  }
}

/* base64url without padding (RFC 4648 section 5), as core's toBase64Url writes it. */
static size_t b64url(const unsigned char *in, size_t n, char *out) {
  size_t o = 0, i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8) | in[i + 2];
    memcpy(out + o, &PAIRS[v >> 12], 2);
    memcpy(out + o + 2, &PAIRS[v & 0xfff], 2);
    o += 4;
  }
  if (n - i == 1) {
    uint32_t v = (uint32_t)in[i] << 16;
    out[o++] = B64URL[v >> 18];
    out[o++] = B64URL[(v >> 12) & 63];
  } else if (n - i == 2) {
    uint32_t v = ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8);
    out[o++] = B64URL[v >> 18];
    out[o++] = B64URL[(v >> 12) & 63];
    out[o++] = B64URL[(v >> 6) & 63];
  }
  return o;
}

static void free_context(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  EVP_CIPHER_CTX_free((EVP_CIPHER_CTX *)data);
}

static napi_value fail(napi_env env, const char *why) {
  napi_throw_error(env, "ERR_NATIVE_SEAL", why);
  return NULL;
}

/* Borrows the bytes of a Uint8Array argument (no copy). */
static int bytes_of(napi_env env, napi_value v, unsigned char **data, size_t *len) {
  napi_typedarray_type type;
  napi_value buffer;
  size_t offset;
  if (napi_get_typedarray_info(env, v, &type, len, (void **)data, &buffer, &offset) != napi_ok) return 0;
  return type == napi_uint8_array;
}

/* context(rawKey: Uint8Array(32)): an external holding an AES-256-GCM context keyed once. */
static napi_value Context(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  unsigned char *key;
  size_t len;
  napi_value ext;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1) return fail(env, "context(key) takes a key");
  if (!bytes_of(env, argv[0], &key, &len) || len != 32) return fail(env, "the key must be a Uint8Array of 32 bytes");
  EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
  if (!ctx || EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, NULL) != 1) {
    EVP_CIPHER_CTX_free(ctx);
    return fail(env, "could not key an AES-256-GCM context");
  }
  if (napi_create_external(env, ctx, free_context, NULL, &ext) != napi_ok) {
    EVP_CIPHER_CTX_free(ctx);
    return fail(env, "could not keep the context");
  }
  return ext;
}

static int set_string(napi_env env, napi_value array, uint32_t at, const char *s, size_t n) {
  napi_value v;
  return napi_create_string_latin1(env, s, n, &v) == napi_ok && napi_set_element(env, array, at, v) == napi_ok;
}

/*
 * seal(context, aad: string, plaintext: Uint8Array): [iv, ct, tag, sha256] — the first three
 * base64url, the last hex — or undefined for an input this path does not take (too large).
 * The IV is 12 fresh bytes from RAND_bytes; the AAD is the string's UTF-8 bytes.
 */
static napi_value Seal(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  EVP_CIPHER_CTX *ctx;
  unsigned char *pt;
  size_t ptlen, aadlen;
  char aad[MAX_AAD + 1];
  unsigned char iv[12], tag[16], digest[32];
  napi_value out;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3) return fail(env, "seal(context, aad, plaintext)");
  if (napi_get_value_external(env, argv[0], (void **)&ctx) != napi_ok) return fail(env, "not a seal context");
  /* The AAD's whole UTF-8 length first: a copy into a short buffer would cut it silently. */
  if (napi_get_value_string_utf8(env, argv[1], NULL, 0, &aadlen) != napi_ok) return fail(env, "the AAD must be a string");
  if (!bytes_of(env, argv[2], &pt, &ptlen)) return fail(env, "the plaintext must be a Uint8Array");
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  if (ptlen > MAX_PLAINTEXT || aadlen > MAX_AAD) return undefined; /* the portable path takes it */
  if (napi_get_value_string_utf8(env, argv[1], aad, sizeof aad, &aadlen) != napi_ok) return fail(env, "the AAD must be a string");

  unsigned char *ct = malloc(ptlen + 16);
  /* Room for the longest of the four answers: the ciphertext's base64url or the 64 hex digits. */
  size_t room = ((ptlen + 2) / 3) * 4;
  char *text = malloc((room > 64 ? room : 64) + 8);
  if (!ct || !text) {
    free(ct);
    free(text);
    return fail(env, "out of memory");
  }
  int len = 0, tail = 0, ok = RAND_bytes(iv, sizeof iv) == 1 && EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, iv) == 1 &&
                                  EVP_EncryptUpdate(ctx, NULL, &len, (unsigned char *)aad, (int)aadlen) == 1 &&
                                  EVP_EncryptUpdate(ctx, ct, &len, pt, (int)ptlen) == 1 &&
                                  EVP_EncryptFinal_ex(ctx, ct + len, &tail) == 1 &&
                                  EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag) == 1 &&
                                  EVP_Digest(pt, ptlen, digest, NULL, EVP_sha256(), NULL) == 1;
  if (ok) ok = napi_create_array_with_length(env, 4, &out) == napi_ok;
  if (ok) ok = set_string(env, out, 0, text, b64url(iv, sizeof iv, text));
  if (ok) ok = set_string(env, out, 1, text, b64url(ct, (size_t)(len + tail), text));
  if (ok) ok = set_string(env, out, 2, text, b64url(tag, sizeof tag, text));
  if (ok) {
    static const char HEX[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
      text[2 * i] = HEX[digest[i] >> 4];
      text[2 * i + 1] = HEX[digest[i] & 15];
    }
    ok = set_string(env, out, 3, text, 64);
  }
  free(ct);
  free(text);
  if (!ok) return fail(env, "the native seal failed");
  return out;
}

NAPI_MODULE_INIT() {
  napi_value f;
  init_pairs();
  napi_create_function(env, "context", NAPI_AUTO_LENGTH, Context, NULL, &f);
  napi_set_named_property(env, exports, "context", f);
  napi_create_function(env, "seal", NAPI_AUTO_LENGTH, Seal, NULL, &f);
  napi_set_named_property(env, exports, "seal", f);
  return exports;
}
