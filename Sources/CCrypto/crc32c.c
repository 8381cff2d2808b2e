#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include "CCrypto.h"

static uint32_t table[8][256];
static int table_ready = 0;

static void build_table(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
  table_ready = 1;
}

static uint32_t crc_software(uint32_t crc, const uint8_t *p, size_t n) {
  if (!table_ready) build_table();
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    w ^= crc;
    crc = table[7][w & 0xFF] ^ table[6][(w >> 8) & 0xFF] ^ table[5][(w >> 16) & 0xFF] ^
          table[4][(w >> 24) & 0xFF] ^ table[3][(w >> 32) & 0xFF] ^ table[2][(w >> 40) & 0xFF] ^
          table[1][(w >> 48) & 0xFF] ^ table[0][w >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xFF];
  return crc;
}

#if defined(__x86_64__)
// The instruction takes three cycles and the core can start one per cycle, so one chain of
// crc32 instructions runs at a third of the speed the core allows: runs of 3 · LANE bytes are
// checksummed as three independent lanes, interleaved, and joined. Joining two lanes is
// shifting the first by LANE bytes (multiplying its remainder by x^(8·LANE), a linear map on 32
// bits, done with four table lookups) and adding the second, as in CCrypto_crc32c_combine.
#define LANE 1024
static uint32_t lane_shift[4][256];
static pthread_once_t lane_once = PTHREAD_ONCE_INIT;
static uint32_t multiply_mod_p(uint32_t a, uint32_t b);
static uint32_t x_to_8n_mod_p(uint64_t len);

static void build_lane_shift(void) {
  uint32_t k = x_to_8n_mod_p(LANE);
  for (int t = 0; t < 4; t++)
    for (uint32_t i = 0; i < 256; i++) lane_shift[t][i] = multiply_mod_p(k, i << (8 * t));
}

static inline uint32_t shifted_by_lane(uint32_t v) {
  return lane_shift[0][v & 0xFF] ^ lane_shift[1][(v >> 8) & 0xFF] ^ lane_shift[2][(v >> 16) & 0xFF] ^ lane_shift[3][v >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t crc_hardware(uint32_t crc, const uint8_t *p, size_t n) {
  uint64_t c = crc;
  if (n >= 3 * LANE) {
    pthread_once(&lane_once, build_lane_shift);
    while (n >= 3 * LANE) {
      uint64_t c1 = 0, c2 = 0;
      for (const uint8_t *end = p + LANE; p < end; p += 8) {
        uint64_t w0, w1, w2;
        memcpy(&w0, p, 8);
        memcpy(&w1, p + LANE, 8);
        memcpy(&w2, p + 2 * LANE, 8);
        c = __builtin_ia32_crc32di(c, w0);
        c1 = __builtin_ia32_crc32di(c1, w1);
        c2 = __builtin_ia32_crc32di(c2, w2);
      }
      c = shifted_by_lane(shifted_by_lane((uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
      p += 2 * LANE;
      n -= 3 * LANE;
    }
  }
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c = __builtin_ia32_crc32di(c, w);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = (uint32_t)c;
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
#endif

uint32_t CCrypto_crc32c(uint32_t crc, const void *data, size_t len) {
  const uint8_t *p = (const uint8_t *)data;
  crc = ~crc;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("sse4.2")) return ~crc_hardware(crc, p, len);
#endif
  return ~crc_software(crc, p, len);
}

// Combining: the CRC of A followed by B from the CRCs of A and B, so that blocks checksummed as
// they arrive, in any order, give the whole object's CRC without reading it again. Appending
// len(B) zero bytes to A multiplies its remainder by x^(8·len(B)) modulo the polynomial; the
// products are computed bit-reflected, as the CRC itself is.
static uint32_t multiply_mod_p(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t bit = 1u << 31; bit != 0; bit >>= 1) {
    if (a & bit) product ^= b;
    b = (b & 1) ? (b >> 1) ^ 0x82F63B78u : b >> 1;
  }
  return product;
}

// x^(8·len) modulo the polynomial, by squaring: powers[k] is x^(2^k).
static uint32_t x_to_8n_mod_p(uint64_t len) {
  uint32_t powers[64];
  powers[0] = 1u << 30;  // x^1, reflected
  for (int k = 1; k < 64; k++) powers[k] = multiply_mod_p(powers[k - 1], powers[k - 1]);
  uint32_t result = 1u << 31;  // x^0, reflected
  uint64_t n = len;
  int k = 3;  // 8·len = len·2^3
  while (n != 0 && k < 64) {
    if (n & 1) result = multiply_mod_p(powers[k], result);
    n >>= 1;
    k++;
  }
  return result;
}

uint32_t CCrypto_crc32c_shift(uint64_t len) { return x_to_8n_mod_p(len); }

uint32_t CCrypto_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint32_t shift_b) {
  return multiply_mod_p(shift_b, crc_a) ^ crc_b;
}
