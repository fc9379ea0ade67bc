/* Host harness for a generated MAX7800x project: check_output(), cnn_unload() and the softmax.
 *
 * The accelerator's address window is mapped as plain memory at its real address. The harness
 * writes the output layers' words (OUT.memory: address/value pairs, all of them even when
 * sampleoutput.h checks only the first --max-checklines) and the known-answer words
 * (sampleoutput.h) into data memory, then
 *   1. calls check_output(): it must pass;
 *   2. flips single bits of the checked words, one at a time: check_output() must fail each time
 *      (every masked bit of the first and last words, and a spread of bits in between);
 *   3. calls cnn_unload() and writes the buffer to OUT.unload;
 *   4. with a third argument S (the softmax input shift), runs the project's softmax on the
 *      unloaded 32-bit values and writes the Q15 results to OUT.softmax.
 * Exit status 0 when 1 and 2 hold; prints what failed otherwise.
 * Build: gcc -O0 -fno-builtin -I<devtrace include> -I<project> kat_harness.c cnn.c main.c(-Dmain=...)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include "mxc.h"
#include "cnn.h"
#include SAMPLE_OUTPUT_HEADER

#define WINDOW_BASE 0x50000000UL
#define WINDOW_SIZE 0x0A000000UL

/* The MSDK register blocks the generated code touches (host memory here). */
mxc_gcfr_regs_t devtrace_gcfr;
mxc_gcr_regs_t devtrace_gcr;
mxc_lpgcr_regs_t devtrace_lpgcr;
mxc_gpio_regs_t devtrace_gpio[4];
mxc_icc_regs_t devtrace_icc[2];
mxc_tmr_regs_t devtrace_tmr[6];
mxc_bbfc_regs_t devtrace_bbfc;
mxc_fcr_regs_t devtrace_fcr;
mxc_sema_regs_t devtrace_sema;
uint32_t __FlashStart_;
mxc_pwrseq_regs_t devtrace_pwrseq;
mxc_mcr_regs_t devtrace_mcr;
mxc_sim_regs_t devtrace_sim;
mxc_trimsir_regs_t devtrace_trimsir;
uint32_t SystemCoreClock = 100000000;

static const uint32_t expected[] = SAMPLE_OUTPUT;
static uint32_t out_buf[UNLOAD_BYTES / 4 + 4];

static void store_expected(void)
{
  const uint32_t *p = expected;
  uint32_t addr, mask, len, i;
  while ((addr = *p++) != 0) {
    mask = *p++;
    len = *p++;
    for (i = 0; i < len; i++, addr += 4)
      *(volatile uint32_t *) (uintptr_t) addr = *p++ & mask;
  }
}

/* Flip bit `bit` of every `stride`-th masked word; check_output() must notice each flip. */
static int flips(uint32_t stride)
{
  const uint32_t *p = expected;
  uint32_t addr, mask, len, i, bit, n = 0, total = 0, tried = 0;
  int missed = 0;
  while (p[0] != 0) {
    total += p[2];
    p += 3 + p[2];
  }
  p = expected;
  while ((addr = *p++) != 0) {
    mask = *p++;
    len = *p++;
    for (i = 0; i < len; i++, addr += 4, n++) {
      int edge = n == 0 || n == total - 1;
      if (!edge && n % stride)
        continue;
      for (bit = 0; bit < 32; bit++) {
        if (!(mask >> bit & 1) || (!edge && bit != n % 32 && bit != 31 - n % 32))
          continue;
        volatile uint32_t *w = (volatile uint32_t *) (uintptr_t) addr;
        *w ^= 1u << bit;
        tried++;
        if (check_output() == CNN_OK) {
          fprintf(stderr, "bit %u of 0x%08x flipped, check_output() passed\n", bit, addr);
          missed++;
        }
        *w ^= 1u << bit;
      }
    }
    p += len;
  }
  fprintf(stderr, "harness: %u single-bit flips detected of %u tried\n", tried - missed, tried);
  return missed;
}

int main(int argc, char **argv)
{
  FILE *f;
  char path[4096];
  if (argc < 2) {
    fprintf(stderr, "usage: %s OUT [SOFTMAX_SHIFT]\n", argv[0]);
    return 2;
  }
  if (mmap((void *) WINDOW_BASE, WINDOW_SIZE, PROT_READ | PROT_WRITE,
           MAP_FIXED_NOREPLACE | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != (void *) WINDOW_BASE) {
    perror("harness: cannot map the accelerator window");
    return 3;
  }
  snprintf(path, sizeof path, "%s.memory", argv[1]);
  f = fopen(path, "rb");
  if (f) {
    uint32_t pair[2];
    while (fread(pair, sizeof pair, 1, f) == 1)
      *(volatile uint32_t *) (uintptr_t) pair[0] = pair[1];
    fclose(f);
  }
  store_expected();
  if (check_output() != CNN_OK) {
    fprintf(stderr, "check_output() failed on the known-answer memory\n");
    return 1;
  }
  if (flips(97) != 0)
    return 1;
  cnn_unload(out_buf);
  snprintf(path, sizeof path, "%s.unload", argv[1]);
  f = fopen(path, "wb");
  fwrite(out_buf, 1, UNLOAD_BYTES, f);
  fclose(f);
  if (argc > 2) {
    q15_t prob[CNN_NUM_OUTPUTS];
    int shift = atoi(argv[2]);
    if (shift)
      softmax_shift_q17p14_q15((q31_t *) out_buf, CNN_NUM_OUTPUTS, (uint8_t) shift, prob);
    else
      softmax_q17p14_q15((const q31_t *) out_buf, CNN_NUM_OUTPUTS, prob);
    snprintf(path, sizeof path, "%s.softmax", argv[1]);
    f = fopen(path, "wb");
    fwrite(prob, sizeof(q15_t), CNN_NUM_OUTPUTS, f);
    fclose(f);
  }
  return 0;
}
