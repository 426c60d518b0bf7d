package browser

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// BenchmarkProofOfWorkCost measures why the proof-of-work dial was removed
// (issue 13, item 4; gateway.RemovedDials and docs/waiting-room.md): what a
// SHA-256 puzzle costs a fan's browser against what it costs a bot on a
// server, in hashes per CPU-second of the thread that hashes:
//
//   - Go's crypto/sha256 on one core (a bot farm's worker; no GPU, no
//     multi-buffer SIMD: the bot's worst case),
//   - a Web Worker in headless Chromium (the best a waiting-room page can
//     do: a tight JavaScript SHA-256 over one pre-padded block, the nonce a
//     word of it, as a solver does; and crypto.subtle.digest, batched),
//   - the page's own thread, at full speed and slowed 4x by CDP
//     Emulation.setCPUThrottlingRate (DevTools' mid-range phone), by the
//     wall clock: throttling pauses the thread, so only the wall clock
//     sees it.
//
// Rates are per CPU-second (each thread's own CPU time, from
// /proc/.../schedstat), not per wall-second: on a shared machine the wall
// clock measures the neighbours. The phone is the worker's rate divided by
// four (the throttle's model, which Chromium applies to the page thread,
// not to a dedicated worker); the throttled page thread's wall-clock rate
// is reported beside it. Then: the difficulty (leading zero bits) at which
// a join costs the bot one core-second, and what it costs that phone. Not
// a test: nothing here asserts a time. Run it with
//
//	go test -run '^$' -bench ProofOfWorkCost -benchtime 1x ./loadtest/browser/
func BenchmarkProofOfWorkCost(b *testing.B) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, powPage)
	}))
	defer page.Close()
	bc := browser(b)
	root := chromedp.FromContext(bc).Browser.Process().Pid
	c, cancel := chromedp.NewContext(bc)
	defer cancel()
	if _, err := chromedp.Run(c, chromedp.Navigate(page.URL)); err != nil {
		b.Fatal(err)
	}
	if ok, err := chromedp.Run(c, chromedp.Evaluate[bool](`selfTest()`)); err != nil || !ok {
		b.Fatalf("the page's SHA-256 does not hash \"abc\" right: %v %v", ok, err)
	}
	// js runs a measurement ([hashes, wall seconds]) and returns hashes per
	// CPU-second of the busiest Chromium thread meanwhile (the hashing one)
	// and per wall-second.
	js := func(expr string) (perCPU, perWall float64) {
		b.Helper()
		before := threadCPU(root)
		v, err := chromedp.Run(c, chromedp.Evaluate[[]float64](expr, chromedp.EvalAwaitPromise))
		if err != nil || len(v) != 2 {
			b.Fatalf("%s: %v %v", expr, v, err)
		}
		var busiest time.Duration
		for k, t := range threadCPU(root) {
			busiest = max(busiest, t-before[k])
		}
		return v[0] / busiest.Seconds(), v[0] / v[1]
	}
	throttle := func(rate float64) {
		b.Helper()
		err := chromedp.Do(c, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetCPUThrottlingRate, emulation.SetCPUThrottlingRateParams{Rate: rate})
			return err
		}))
		if err != nil {
			b.Fatal(err)
		}
	}
	ms := window.Milliseconds()
	worker := fmt.Sprintf(`inWorker("js", %d)`, ms)
	subtle := fmt.Sprintf(`inWorker("subtle", %d)`, ms)
	onPage := fmt.Sprintf(`Promise.resolve(hashJS(%d))`, ms)
	// Rounds, interleaved; each figure the best of its rounds.
	var goRate, workerRate, subtleRate, pageCPU, pageWall, page4Wall float64
	for range rounds {
		goRate = max(goRate, goHashRate(window))
		w, _ := js(worker)
		workerRate = max(workerRate, w)
		sr, _ := js(subtle)
		subtleRate = max(subtleRate, sr)
		pc, pw := js(onPage)
		pageCPU, pageWall = max(pageCPU, pc), max(pageWall, pw)
		throttle(4)
		_, pw4 := js(onPage)
		throttle(1)
		page4Wall = max(page4Wall, pw4)
	}
	phone := workerRate / 4
	bits := math.Round(math.Log2(goRate)) // 2^bits hashes: about one core-second for the bot
	work := math.Pow(2, bits)
	b.ReportMetric(goRate, "go-hashes/cpu-s")
	b.ReportMetric(workerRate, "worker-js-hashes/cpu-s")
	b.ReportMetric(subtleRate, "worker-subtle-hashes/cpu-s")
	b.ReportMetric(pageCPU, "page-js-hashes/cpu-s")
	b.ReportMetric(pageWall, "page-js-hashes/wall-s")
	b.ReportMetric(page4Wall, "page-js-4x-hashes/wall-s")
	b.ReportMetric(bits, "bits-for-1s-bot")
	b.ReportMetric(work/phone, "phone-s-per-join")
	b.Logf("SHA-256 hashes per CPU-second, best of %d rounds of %v: Go crypto/sha256 %.3g; Chromium Web Worker JS %.3g, "+
		"subtle.digest %.3g, the page thread %.3g; the page thread by the wall clock %.3g, throttled 4x %.3g (%.1fx slower)",
		rounds, window, goRate, workerRate, subtleRate, pageCPU, pageWall, page4Wall, pageWall/page4Wall)
	b.Logf("a difficulty of %.0f bits costs the bot %.2f core-seconds a join, a desktop's worker %.1f s, a phone at a quarter of it %.0f s (%.0fx the bot)",
		bits, work/goRate, work/workerRate, work/phone, goRate/phone)
}

// The benchmark's rounds and each measurement's length.
const (
	rounds = 5
	window = time.Second
)

// goHashRate is crypto/sha256's hashes per CPU-second of this thread, over
// a one-block message whose nonce word changes (the page's message).
func goHashRate(d time.Duration) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	msg := []byte("12345:vis:AAAAAAAAAAAAAAAAAAAAAA:nonce...") // about what the removed dial's challenge was
	var n uint32
	var sink byte
	cpu0, start := selfCPU(), time.Now()
	for time.Since(start) < d {
		for range 4096 {
			binary.BigEndian.PutUint32(msg[len(msg)-4:], n)
			n++
			s := sha256.Sum256(msg)
			sink ^= s[0]
		}
	}
	_ = sink
	return float64(n) / (selfCPU() - cpu0).Seconds()
}

// selfCPU is the calling thread's CPU time.
func selfCPU() time.Duration { return schedstat("/proc/thread-self/schedstat") }

// threadCPU is the CPU time of every thread of root and its descendants,
// by "pid/tid".
func threadCPU(root int) map[string]time.Duration {
	parent := map[int]int{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + p.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so after the last ')'.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	mine := func(pid int) bool {
		for ; pid > 1; pid = parent[pid] {
			if pid == root {
				return true
			}
		}
		return false
	}
	out := map[string]time.Duration{}
	for pid := range parent {
		if !mine(pid) {
			continue
		}
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, t := range tasks {
			out[fmt.Sprintf("%d/%s", pid, t.Name())] = schedstat(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		}
	}
	return out
}

// schedstat reads the CPU time (the first field, in ns) of a schedstat file.
func schedstat(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	ns, _ := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns)
}

// powPage hashes in a Web Worker (inWorker) or on the page (hashJS) for a
// time and answers hashes a second. The JavaScript SHA-256 compresses one
// 64-byte block (the message padded once; the nonce is word 10), as a
// puzzle solver does; selfTest checks it against SHA-256("abc").
const powPage = `<!doctype html><meta charset="utf-8"><title>pow</title><script>
const sha = String.raw` + "`" + `
const K = new Int32Array([0x428a2f98,0x71374491,0xb5c0fbcf,0xe9b5dba5,0x3956c25b,0x59f111f1,0x923f82a4,0xab1c5ed5,
0xd807aa98,0x12835b01,0x243185be,0x550c7dc3,0x72be5d74,0x80deb1fe,0x9bdc06a7,0xc19bf174,0xe49b69c1,0xefbe4786,
0x0fc19dc6,0x240ca1cc,0x2de92c6f,0x4a7484aa,0x5cb0a9dc,0x76f988da,0x983e5152,0xa831c66d,0xb00327c8,0xbf597fc7,
0xc6e00bf3,0xd5a79147,0x06ca6351,0x14292967,0x27b70a85,0x2e1b2138,0x4d2c6dfc,0x53380d13,0x650a7354,0x766a0abb,
0x81c2c92e,0x92722c85,0xa2bfe8a1,0xa81a664b,0xc24b8b70,0xc76c51a3,0xd192e819,0xd6990624,0xf40e3585,0x106aa070,
0x19a4c116,0x1e376c08,0x2748774c,0x34b0bcb5,0x391c0cb3,0x4ed8aa4a,0x5b9cca4f,0x682e6ff3,0x748f82ee,0x78a5636f,
0x84c87814,0x8cc70208,0x90befffa,0xa4506ceb,0xbef9a3f7,0xc67178f2]);
const IV = new Int32Array([0x6a09e667,0xbb67ae85,0x3c6ef372,0xa54ff53a,0x510e527f,0x9b05688c,0x1f83d9ab,0x5be0cd19]);
const W = new Int32Array(64);
function compress(block, out) {
  for (let i = 0; i < 16; i++) W[i] = block[i];
  for (let i = 16; i < 64; i++) {
    const x = W[i-15], y = W[i-2];
    const s0 = ((x>>>7)|(x<<25)) ^ ((x>>>18)|(x<<14)) ^ (x>>>3);
    const s1 = ((y>>>17)|(y<<15)) ^ ((y>>>19)|(y<<13)) ^ (y>>>10);
    W[i] = (W[i-16] + s0 + W[i-7] + s1) | 0;
  }
  let a = IV[0], b = IV[1], c = IV[2], d = IV[3], e = IV[4], f = IV[5], g = IV[6], h = IV[7];
  for (let i = 0; i < 64; i++) {
    const S1 = ((e>>>6)|(e<<26)) ^ ((e>>>11)|(e<<21)) ^ ((e>>>25)|(e<<7));
    const t1 = (h + S1 + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
    const S0 = ((a>>>2)|(a<<30)) ^ ((a>>>13)|(a<<19)) ^ ((a>>>22)|(a<<10));
    const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
  }
  out[0] = a + IV[0]; out[1] = b + IV[1]; out[2] = c + IV[2]; out[3] = d + IV[3];
  out[4] = e + IV[4]; out[5] = f + IV[5]; out[6] = g + IV[6]; out[7] = h + IV[7];
}
// pad makes the one block of a message under 56 bytes.
function pad(bytes) {
  const b = new Uint8Array(64); b.set(bytes); b[bytes.length] = 0x80;
  const bits = bytes.length * 8; b[62] = bits >>> 8; b[63] = bits & 255;
  const w = new Int32Array(16);
  for (let i = 0; i < 16; i++) w[i] = (b[4*i]<<24) | (b[4*i+1]<<16) | (b[4*i+2]<<8) | b[4*i+3];
  return w;
}
function hashJS(ms) {
  const block = pad(new TextEncoder().encode("12345:vis:AAAAAAAAAAAAAAAAAAAAAA:nonce...")), out = new Int32Array(8);
  let n = 0, zeros = 0;
  const start = performance.now();
  while (performance.now() - start < ms) {
    for (let i = 0; i < 4096; i++) { block[10] = n++; compress(block, out); if (out[0] === 0) zeros++; }
  }
  return [n, (performance.now() - start) / 1000];
}
async function hashSubtle(ms) {
  const msg = new TextEncoder().encode("12345:vis:AAAAAAAAAAAAAAAAAAAAAA:nonce...");
  const view = new DataView(msg.buffer);
  let n = 0;
  const start = performance.now();
  while (performance.now() - start < ms) {
    const batch = [];
    for (let i = 0; i < 256; i++) { view.setUint32(msg.length - 4, n++); batch.push(crypto.subtle.digest("SHA-256", msg.slice())); }
    await Promise.all(batch);
  }
  return [n, (performance.now() - start) / 1000];
}
` + "`" + `;
eval(sha);
function selfTest() {
  const out = new Int32Array(8);
  compress(pad(new TextEncoder().encode("abc")), out);
  return Array.from(out, (x) => (x >>> 0).toString(16).padStart(8, "0")).join("") ===
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
}
// One worker, kept: its thread's CPU time is read before and after each
// measurement (a terminated worker's thread is gone from /proc).
const worker = new Worker(URL.createObjectURL(new Blob([sha +
  "onmessage = async (e) => postMessage(e.data.kind === 'js' ? hashJS(e.data.ms) : await hashSubtle(e.data.ms));"],
  { type: "text/javascript" })));
function inWorker(kind, ms) {
  return new Promise((resolve) => { worker.onmessage = (e) => resolve(e.data); worker.postMessage({ kind, ms }); });
}
</script>`
