"""A bank through redis-py with its defaults (RESP3 through HELLO 3) against
Meridian's Redis gateway, meant to run while shard leaders are killed.

Usage: redis_py_bank.py PORT ACCOUNTS TRANSFER_THREADS READ_THREADS SECONDS

Accounts `bank:acct:<i>` start at INITIAL each. Transfer threads move money
with MULTI/EXEC pipelines (DECRBY, INCRBY) that also APPEND
`<id>:<from>:<to>:<amount>;` to the thread's log key `bank:log:<t>`, so the
logs say exactly which transfers took effect. Read threads read every
account and every log in one transaction (MGET, or a MULTI of GETs) and
check that the total never changes and that the balances are the initial
ones plus the effect of exactly the logged transfers. At the end one read
checks the same, and that every acknowledged transfer is logged once, no
transfer the gateway refused is, and each log entry is the transfer its
thread sent under that id.

Prints `bank: ...` (counts) and `acked-at ...` (each acknowledgement's Unix
time); exits non-zero on any violation. Errors while leaders fail over are
expected: each operation catches them and retries on a fresh connection.
"""

import random
import sys
import threading
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

INITIAL = 1000
# Long enough for a gateway to ride out a leader's failover (it answers
# "outcome unknown" or "aborted" itself when a transaction cannot finish).
SOCKET_TIMEOUT = 30
# A transient error's pause before the next operation.
PAUSE = 0.1


def acct(i):
    return f"bank:acct:{i}"


def log_key(t):
    return f"bank:log:{t}"


class Bank:
    def __init__(self, port, accounts, writers):
        self.port = port
        self.accounts = accounts
        self.writers = writers
        self.keys = [acct(i) for i in range(accounts)] + [log_key(t) for t in range(writers)]
        self.total = INITIAL * accounts
        self.lock = threading.Lock()
        self.violations = []
        # Per transfer id: (from, to, amount) as sent.
        self.sent = {}
        self.acked = set()
        self.acked_at = []
        self.unknown = set()
        self.failed = set()
        self.reads = 0
        self.read_errors = 0

    def client(self, **kw):
        return redis.Redis(port=self.port, socket_timeout=SOCKET_TIMEOUT, **kw)

    def violation(self, text):
        with self.lock:
            self.violations.append(text)
            if len(self.violations) <= 20:  # the first ones say enough
                print(f"VIOLATION {text}", flush=True)

    def check_snapshot(self, values, what):
        """Checks one transaction's view of every account and log: the
        total, and balances equal to the initial ones plus the logged
        transfers. Returns the logged transfers by id (None if broken)."""
        balances, logs = values[: self.accounts], values[self.accounts :]
        if any(b is None for b in balances):
            self.violation(f"{what}: an account is missing: {balances}")
            return None
        balances = [int(b) for b in balances]
        if sum(balances) != self.total:
            self.violation(f"{what}: total {sum(balances)}, want {self.total}: {balances}")
        expect = [INITIAL] * self.accounts
        logged = {}
        for t, log in enumerate(logs):
            for entry in (log or b"").decode().split(";"):
                if not entry:
                    continue
                tid, a, b, x = entry.split(":")
                if tid in logged:
                    self.violation(f"{what}: transfer {tid} applied twice")
                if not tid.startswith(f"{t}."):
                    self.violation(f"{what}: transfer {tid} in thread {t}'s log")
                logged[tid] = (int(a), int(b), int(x))
                expect[int(a)] -= int(x)
                expect[int(b)] += int(x)
        if balances != expect:
            self.violation(f"{what}: balances {balances} are not the logged transfers' {expect}")
        return logged

    def init(self, deadline):
        r = self.client()
        values = {acct(i): INITIAL for i in range(self.accounts)}
        values.update({log_key(t): "" for t in range(self.writers)})
        while True:
            try:
                r.mset(values)  # idempotent: retried until it answers
                return
            except redis.RedisError as e:
                if time.time() > deadline:
                    raise SystemExit(f"FAIL initialising the bank: {e!r}")
                time.sleep(PAUSE)

    def transfers(self, t, deadline):
        # redis-py by default sends a command again after a timeout or a
        # lost connection; for a MULTI/EXEC whose first run committed that
        # applies the transfer twice. Without it, such an error is what it
        # is: an outcome the client does not know.
        r = self.client(retry=Retry(NoBackoff(), 0))
        rng = random.Random(t)
        seq = 0
        while time.time() < deadline:
            a, b = rng.sample(range(self.accounts), 2)
            x = rng.randint(1, 50)
            tid = f"{t}.{seq}"
            seq += 1
            with self.lock:
                self.sent[tid] = (a, b, x)
            pipe = r.pipeline(transaction=True)
            pipe.decrby(acct(a), x)
            pipe.incrby(acct(b), x)
            pipe.append(log_key(t), f"{tid}:{a}:{b}:{x};")
            try:
                replies = pipe.execute()
            except redis.ResponseError as e:
                # The gateway gives up on a transaction it saw abort every
                # time (so none of its attempts committed); any other error
                # leaves the outcome open.
                refused = "aborted" in str(e) or "EXECABORT" in str(e)
                with self.lock:
                    (self.failed if refused else self.unknown).add(tid)
                time.sleep(PAUSE)
                continue
            except (redis.ConnectionError, redis.TimeoutError):
                with self.lock:
                    self.unknown.add(tid)
                time.sleep(PAUSE)
                continue
            if len(replies) != 3 or not all(isinstance(v, int) for v in replies):
                self.violation(f"transfer {tid}: replies {replies!r}")
            with self.lock:
                self.acked.add(tid)
                self.acked_at.append(time.time())

    def read_all(self, r, as_multi):
        if as_multi:
            pipe = r.pipeline(transaction=True)
            for k in self.keys:
                pipe.get(k)
            return pipe.execute()
        return r.mget(self.keys)

    def reads_loop(self, t, deadline):
        r = self.client()  # reads are idempotent: redis-py's retries are fine
        n = 0
        while time.time() < deadline:
            n += 1
            try:
                values = self.read_all(r, n % 2 == 0)
            except (redis.ResponseError, redis.ConnectionError, redis.TimeoutError):
                with self.lock:
                    self.read_errors += 1
                time.sleep(PAUSE)
                continue
            self.check_snapshot(values, f"read {t}.{n}")
            with self.lock:
                self.reads += 1

    def final(self, deadline):
        r = self.client()
        while True:
            try:
                values = self.read_all(r, False)
                break
            except redis.RedisError as e:
                if time.time() > deadline:
                    raise SystemExit(f"FAIL the final read: {e!r}")
                time.sleep(PAUSE)
        logged = self.check_snapshot(values, "final read")
        if logged is None:
            return 0
        lost = sorted(self.acked - logged.keys())
        if lost:
            self.violation(f"acknowledged transfers not applied: {lost[:20]} ({len(lost)})")
        ghosts = sorted(self.failed & logged.keys())
        if ghosts:
            self.violation(f"refused transfers applied: {ghosts[:20]} ({len(ghosts)})")
        for tid, what in logged.items():
            if self.sent.get(tid) != what:
                self.violation(f"logged transfer {tid} {what} was sent as {self.sent.get(tid)}")
        return len(self.unknown & logged.keys())


def main():
    port, accounts, writers, readers = (int(a) for a in sys.argv[1:5])
    seconds = float(sys.argv[5])
    bank = Bank(port, accounts, writers)
    start = time.time()
    bank.init(start + 30)
    deadline = time.time() + seconds
    threads = [threading.Thread(target=bank.transfers, args=(t, deadline)) for t in range(writers)]
    threads += [threading.Thread(target=bank.reads_loop, args=(t, deadline)) for t in range(readers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    unknown_applied = bank.final(time.time() + 60)
    print(
        f"bank: transfers acknowledged={len(bank.acked)} unknown={len(bank.unknown)} "
        f"(applied={unknown_applied}) failed={len(bank.failed)}; reads checked={bank.reads} "
        f"read errors={bank.read_errors}; total={bank.total}; violations={len(bank.violations)}"
    )
    print("acked-at " + " ".join(f"{t:.3f}" for t in sorted(bank.acked_at)))
    if bank.violations:
        raise SystemExit(f"FAIL {len(bank.violations)} violations, first: {bank.violations[0]}")


main()
