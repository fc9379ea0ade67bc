/* edgesynth's recorder: runs a generated MAX7800x project's CNN functions on a Linux x86-64
 * PC and writes every store they make to the accelerator, in order, as the trace the virtual
 * device replays (little-endian uint32 address, uint32 value records; see vdevice/trace.py).
 *
 * How: the accelerator's address ranges (recorder_map.h, written from regmap.py) are mapped
 * at their real addresses, readable but not writable. A store there faults; the fault handler
 * makes the page writable, keeps a copy of it and single-steps the store (x86 trap flag).
 * After the store the trap handler records the word at the store's address (so a FIFO that is
 * written the same value twice shows two writes), then every other word of the page that the
 * store changed, in address order, and makes the page read-only again.
 *
 * The peripheral space the MSDK stand-in addresses (clocks, GPIO, timers) is plain memory.
 * Registers the generated code waits on complete at once (rec_status in recorder_map.h).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "mxc.h"
#include "recorder_map.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define WORDS (REC_PAGE / 4)

uint32_t SystemCoreClock = REC_CORE_CLOCK;

/* What the project may call besides the accelerator: nothing to do on a PC. */
void SystemCoreClockUpdate(void) {}
void MXC_NVIC_SetVector(int irq, void (*handler)(void)) { (void) irq; (void) handler; }
void MXC_LP_EnterSleepMode(void) {}
void MXC_LP_EnterLowPowerMode(void) {}
void NVIC_EnableIRQ(int irq) { (void) irq; }
void NVIC_EnableEVENT(int irq) { (void) irq; }
void NVIC_ClearPendingIRQ(int irq) { (void) irq; }
void NVIC_ClearPendingEVENT(int irq) { (void) irq; }
void __enable_irq(void) {}
void Debug_Init(void) {}

/* The project's functions, in the order a generated main() calls them. */
int cnn_enable(uint32_t clock_source, uint32_t clock_divider);
int cnn_init(void);
int cnn_load_weights(void);
int cnn_load_bias(void);
int cnn_configure(void);
void load_input(void);
int cnn_start(void);

static FILE *trace;
static unsigned long written;
static uintptr_t store_word;   /* the word the faulting store goes to */
static uintptr_t store_page;
static uint32_t before[WORDS]; /* the page as it was before the store */

static void record(uint32_t address, uint32_t value)
{
    const uint32_t pair[2] = {address, value};
    if (fwrite(pair, sizeof pair, 1, trace) != 1) {
        perror("recorder: writing the trace");
        _exit(4);
    }
    written++;
}

static int recorded_address(uintptr_t address)
{
    for (size_t i = 0; i < COUNT(rec_windows); i++)
        if (address >= rec_windows[i][0] && address < rec_windows[i][1])
            return 1;
    return 0;
}

static void complete_status(uint32_t address, volatile uint32_t *word)
{
    for (size_t i = 0; i < COUNT(rec_status); i++)
        if (rec_status[i][0] == address && (*word & rec_status[i][1]) == rec_status[i][1])
            *word |= rec_status[i][2];
}

static void on_store(int sig, siginfo_t *info, void *context)
{
    (void) sig;
    uintptr_t address = (uintptr_t) info->si_addr;
    if (!recorded_address(address)) {
        fprintf(stderr, "recorder: the project accessed %p, outside the device's memory map\n",
                info->si_addr);
        _exit(5);
    }
    store_word = address & ~(uintptr_t) 3;
    store_page = address & ~(uintptr_t) (REC_PAGE - 1);
    memcpy(before, (const void *) store_page, REC_PAGE);
    mprotect((void *) store_page, REC_PAGE, PROT_READ | PROT_WRITE);
    ((ucontext_t *) context)->uc_mcontext.gregs[REG_EFL] |= 0x100; /* trap flag */
}

static void after_store(int sig, siginfo_t *info, void *context)
{
    (void) sig;
    (void) info;
    volatile uint32_t *page = (volatile uint32_t *) store_page;
    size_t at = (store_word - store_page) / 4;
    record((uint32_t) store_word, page[at]);
    for (size_t i = 0; i < WORDS; i++)
        if (i != at && page[i] != before[i])
            record((uint32_t) (store_page + 4 * i), page[i]);
    complete_status((uint32_t) store_word, &page[at]);
    mprotect((void *) store_page, REC_PAGE, PROT_READ);
    ((ucontext_t *) context)->uc_mcontext.gregs[REG_EFL] &= ~0x100UL;
}

static int map_at(uintptr_t start, uintptr_t end, int protection)
{
    void *want = (void *) start;
    void *got = mmap(want, end - start, protection,
                     MAP_FIXED_NOREPLACE | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (got != want) {
        fprintf(stderr, "recorder: cannot map 0x%08lx..0x%08lx\n", (unsigned long) start,
                (unsigned long) end);
        return 0;
    }
    return 1;
}

static int map_device(void)
{
    if (!map_at(REC_PERIPHERAL_BASE, REC_PERIPHERAL_BASE + REC_PERIPHERAL_SIZE,
                PROT_READ | PROT_WRITE))
        return 0;
    for (size_t i = 0; i < COUNT(rec_windows); i++) {
        uintptr_t start = rec_windows[i][0], end = rec_windows[i][1];
        int inside = start >= REC_PERIPHERAL_BASE &&
                     end <= REC_PERIPHERAL_BASE + REC_PERIPHERAL_SIZE;
        if (inside ? mprotect((void *) start, end - start, PROT_READ) != 0
                   : !map_at(start, end, PROT_READ))
            return 0;
    }
    return 1;
}

static void on_signal(int sig, void (*handler)(int, siginfo_t *, void *))
{
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_flags = SA_SIGINFO;
    action.sa_sigaction = handler;
    sigaction(sig, &action, NULL);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s TRACE\n", argv[0]);
        return 2;
    }
    if (!map_device())
        return 3;
    MXC_GCR->ipll_ctrl = MXC_F_GCR_IPLL_CTRL_RDY; /* the PLL is locked from the start */
    trace = fopen(argv[1], "wb");
    if (trace == NULL) {
        perror(argv[1]);
        return 2;
    }
    on_signal(SIGSEGV, on_store);
    on_signal(SIGTRAP, after_store);

    /* A FIFO project starts before it streams its input; only the writes matter here. */
    record(REC_MARK_CNN_ENABLE, 0);
    cnn_enable(0, 0);
    record(REC_MARK_CNN_INIT, 0);
    cnn_init();
    record(REC_MARK_CNN_LOAD_WEIGHTS, 0);
    cnn_load_weights();
    record(REC_MARK_CNN_LOAD_BIAS, 0);
    cnn_load_bias();
    record(REC_MARK_CNN_CONFIGURE, 0);
    cnn_configure();
    record(REC_MARK_LOAD_INPUT, 0);
    load_input();
    record(REC_MARK_CNN_START, 0);
    cnn_start();
    record(REC_MARK_END, 0);
    if (fclose(trace) != 0) {
        perror(argv[1]);
        return 4;
    }
    fprintf(stderr, "recorder: %lu writes recorded\n", written);
    return 0;
}
