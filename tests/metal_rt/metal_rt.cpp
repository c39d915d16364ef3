// The scheduler of the executing Metal runtime (see metal_stdlib): runs one dispatch of one
// kernel entry point over its grid, threadgroup by threadgroup, every invocation of a
// threadgroup as a fiber (ucontext) on one OS thread. A fiber runs until it blocks at
// threadgroup_barrier or a simd_* rendezvous (or returns); a barrier opens when every invocation
// of the threadgroup waits at it, a rendezvous completes when every live lane of the simdgroup
// has arrived at it. Anything else (divergent simd operations, a barrier that some invocations
// exited before, a deadlock) aborts the dispatch with a message: the test fails.
//
// Usage: <program> <in> <out>. <in>: u32 name length, name, u32 grid[3], u32 threadgroup[3],
// u32 buffer count, then per buffer u64 length + bytes (buffer 0 is the params struct).
// <out>: the buffers' final bytes, concatenated. Each buffer ends at a PROT_NONE guard page
// (when its length is a multiple of 16), so reads or writes past it crash the dispatch.

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "metal_rt_core.h"

namespace mrt {
extern const Entry entries[];
extern const int entry_count;
}  // namespace mrt

namespace {
enum State { READY, AT_BARRIER, AT_SIMD, DONE };
struct Fiber {
    ucontext_t ctx;
    State state;
    const char* what;
    mrt::Builtins b;
};

constexpr size_t STACK = 256 << 10;
Fiber* fibers;
char* stacks;
int nfib;
Fiber* cur;
ucontext_t sched;
std::vector<mrt::SimdSlot> slots;
mrt::EntryFn entry_fn;
void** bufs;
std::vector<void*> poisoned;
unsigned long long tg_linear;

void trampoline() {
    entry_fn(bufs, cur->b);
    cur->state = DONE;
}

void yield_to_scheduler() { swapcontext(&cur->ctx, &sched); }

void try_simd(uint sg) {
    int live = 0, arrived = 0;
    for (int i = (int)sg * mrt::SIMD_WIDTH; i < nfib && i < (int)(sg + 1) * mrt::SIMD_WIDTH; i++) {
        if (fibers[i].state == DONE) continue;
        live++;
        arrived += fibers[i].state == AT_SIMD;
    }
    if (arrived == 0 || arrived != live) return;
    mrt::SimdSlot& s = slots[sg];
    s.fn(s);
    for (int l = 0; l < mrt::SIMD_WIDTH; l++) s.arrived[l] = false;
    s.fn = nullptr;
    for (int i = (int)sg * mrt::SIMD_WIDTH; i < nfib && i < (int)(sg + 1) * mrt::SIMD_WIDTH; i++)
        if (fibers[i].state == AT_SIMD) fibers[i].state = READY;
}

void try_barrier() {
    int live = 0, waiting = 0, done = 0;
    for (int i = 0; i < nfib; i++) {
        if (fibers[i].state == DONE) {
            done++;
            continue;
        }
        live++;
        waiting += fibers[i].state == AT_BARRIER;
    }
    if (waiting == 0 || waiting != live) return;
    if (done > 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "threadgroup %llu: %d invocations wait at threadgroup_barrier that %d others exited without reaching", tg_linear, waiting, done);
        mrt::fail(msg);
    }
    for (int i = 0; i < nfib; i++) fibers[i].state = READY;
}

void run_threadgroup() {
    poisoned.clear();
    for (int i = 0; i < nfib; i++) {
        Fiber& f = fibers[i];
        f.state = READY;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = stacks + (size_t)i * STACK;
        f.ctx.uc_stack.ss_size = STACK;
        f.ctx.uc_link = &sched;
        makecontext(&f.ctx, trampoline, 0);
    }
    for (;;) {
        bool ran = false;
        for (int i = 0; i < nfib; i++) {
            if (fibers[i].state != READY) continue;
            ran = true;
            cur = &fibers[i];
            swapcontext(&sched, &cur->ctx);
            try_simd(cur->b.sid);
            try_barrier();
        }
        if (ran) continue;
        int done = 0;
        for (int i = 0; i < nfib; i++) done += fibers[i].state == DONE;
        if (done == nfib) return;
        std::string msg = "threadgroup " + std::to_string(tg_linear) + " deadlocked:";
        for (int i = 0; i < nfib; i++) {
            if (fibers[i].state == DONE) continue;
            msg += " [" + std::to_string(i) + "] " + (fibers[i].state == AT_BARRIER ? "barrier" : fibers[i].what);
            if (msg.size() > 600) break;
        }
        mrt::fail(msg.c_str());
    }
}

bool read_exact(FILE* f, void* p, size_t n) { return fread(p, 1, n, f) == n; }
}  // namespace

namespace mrt {
[[noreturn]] void fail(const char* what) {
    fprintf(stderr, "metal_rt: %s\n", what);
    fflush(stderr);
    _exit(3);
}

void barrier(const char* what) {
    cur->state = AT_BARRIER;
    cur->what = what;
    yield_to_scheduler();
}

void simd_rendezvous(void (*fn)(SimdSlot&), const char* what, const void* data, unsigned bytes, const unsigned long* aux, void* result, unsigned result_bytes) {
    SimdSlot& s = slots[cur->b.sid];
    const uint lane = cur->b.sl;
    if (s.fn != nullptr && (s.fn != fn || strcmp(s.what, what) != 0)) {
        char msg[300];
        snprintf(msg, sizeof msg, "threadgroup %llu simdgroup %u: lane %u calls %s while other lanes wait in %s (divergent simdgroup operations)", tg_linear, cur->b.sid, lane,
                 what, s.what);
        fail(msg);
    }
    s.fn = fn;
    s.what = what;
    memcpy(s.in[lane], data, bytes);
    memcpy(s.aux[lane], aux, sizeof s.aux[lane]);
    s.arrived[lane] = true;
    cur->state = AT_SIMD;
    cur->what = what;
    yield_to_scheduler();
    memcpy(result, s.out[lane], result_bytes);
}

void poison_threadgroup(void* p, unsigned long bytes) {
    for (void* q : poisoned)
        if (q == p) return;
    poisoned.push_back(p);
    memset(p, 0xff, bytes);
}
}  // namespace mrt

namespace metal::detail {
uint lane() { return cur->b.sl; }
void op_none(mrt::SimdSlot&) {}
}  // namespace metal::detail

int main(int argc, char** argv) {
    if (argc != 3) mrt::fail("usage: <program> <in> <out>");
    FILE* in = fopen(argv[1], "rb");
    if (!in) mrt::fail("cannot open the input");
    uint name_len = 0, grid[3], tgs[3], nbuf = 0;
    char name[256] = {0};
    if (!read_exact(in, &name_len, 4) || name_len >= sizeof name || !read_exact(in, name, name_len) || !read_exact(in, grid, 12) || !read_exact(in, tgs, 12) ||
        !read_exact(in, &nbuf, 4) || nbuf > 64)
        mrt::fail("bad input header");
    for (int i = 0; i < mrt::entry_count; i++)
        if (strcmp(mrt::entries[i].name, name) == 0) entry_fn = mrt::entries[i].fn;
    if (!entry_fn) {
        std::string m = std::string("no entry point ") + name;
        mrt::fail(m.c_str());
    }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    std::vector<void*> ptrs(nbuf);
    std::vector<unsigned long long> lens(nbuf);
    for (uint i = 0; i < nbuf; i++) {
        if (!read_exact(in, &lens[i], 8)) mrt::fail("bad buffer header");
        size_t len = lens[i], padded = (len + 15) / 16 * 16, mapped = (padded + page - 1) / page * page + page;
        char* base = (char*)mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) mrt::fail("mmap");
        mprotect(base + mapped - page, page, PROT_NONE);
        ptrs[i] = base + mapped - page - padded;
        if (!read_exact(in, ptrs[i], len)) mrt::fail("short buffer");
    }
    fclose(in);
    bufs = ptrs.data();
    nfib = (int)(tgs[0] * tgs[1] * tgs[2]);
    if (nfib < 1 || nfib > 1024) mrt::fail("threadgroup size outside 1..=1024");
    fibers = new Fiber[nfib];
    stacks = (char*)mmap(nullptr, STACK * nfib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stacks == MAP_FAILED) mrt::fail("mmap stacks");
    const uint nsg = (uint)(nfib + mrt::SIMD_WIDTH - 1) / mrt::SIMD_WIDTH;
    slots.resize(nsg);
    for (auto& s : slots) memset(&s, 0, sizeof s);
    for (uint z = 0; z < grid[2]; z++)
        for (uint y = 0; y < grid[1]; y++)
            for (uint x = 0; x < grid[0]; x++) {
                tg_linear = x + (unsigned long long)grid[0] * (y + (unsigned long long)grid[1] * z);
                for (int i = 0; i < nfib; i++) {
                    mrt::Builtins& b = fibers[i].b;
                    const uint li = (uint)i, tx = li % tgs[0], ty = (li / tgs[0]) % tgs[1], tz = li / (tgs[0] * tgs[1]);
                    b.tg = uint3{x, y, z};
                    b.ntg = uint3{grid[0], grid[1], grid[2]};
                    b.tptg = uint3{tgs[0], tgs[1], tgs[2]};
                    b.tpitg = uint3{tx, ty, tz};
                    b.tpig = b.tg * b.tptg + b.tpitg;
                    b.li = li;
                    b.sl = li % mrt::SIMD_WIDTH;
                    b.ss = mrt::SIMD_WIDTH;
                    b.sid = li / mrt::SIMD_WIDTH;
                    b.nsg = nsg;
                }
                run_threadgroup();
            }
    FILE* out = fopen(argv[2], "wb");
    if (!out) mrt::fail("cannot open the output");
    for (uint i = 0; i < nbuf; i++)
        if (fwrite(ptrs[i], 1, lens[i], out) != lens[i]) mrt::fail("short write");
    if (fclose(out) != 0) mrt::fail("write");
    return 0;
}
