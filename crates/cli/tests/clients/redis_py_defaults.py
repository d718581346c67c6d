"""redis-py with its defaults (RESP3 through HELLO 3, CLIENT SETINFO) against
Meridian's Redis gateway: strings and counters, MULTI/EXEC through a
transactional pipeline, Redis's errors, concurrent INCRs that lose nothing,
and WATCH check-and-set loops (redis-py's transaction helper) from 8
threads that lose nothing either. Usage: redis_py_defaults.py PORT. Prints one line per check; exits
non-zero on the first failure."""

import sys
import threading

import redis


def check(what, got, want):
    if got != want:
        raise SystemExit(f"FAIL {what}: got {got!r}, want {want!r}")
    print(f"ok {what}")


def run_threads(target, n):
    """Runs `target` on `n` threads and waits for them all."""
    ts = [threading.Thread(target=target) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def main():
    port = int(sys.argv[1])
    r = redis.Redis(port=port, socket_timeout=30)
    check("ping", r.ping(), True)
    conn = r.connection_pool.get_connection()
    check("negotiated RESP3", conn.get_protocol(), 3)
    r.connection_pool.release(conn)

    check("set", r.set("py:a", "1"), True)
    check("get", r.get("py:a"), b"1")
    check("incr", r.incr("py:a"), 2)
    check("incrby", r.incrby("py:a", 40), 42)
    check("decr", r.decr("py:a"), 41)
    check("missing key", r.get("py:missing"), None)
    check("mset", r.mset({"py:x": "1", "py:y": "2"}), True)
    check("mget", r.mget("py:x", "py:y", "py:missing"), [b"1", b"2", None])
    check("exists", r.exists("py:x", "py:x", "py:missing"), 2)
    check("strlen", r.strlen("py:x"), 1)
    check("getrange", r.getrange("py:a", 0, 0), b"4")
    check("type", (r.type("py:x"), r.type("py:missing")), (b"string", b"none"))
    check("delete", r.delete("py:x", "py:missing"), 1)
    check("deleted", r.get("py:x"), None)
    check("setnx", (r.setnx("py:nx", "a"), r.setnx("py:nx", "b")), (True, False))
    check("set nx get", r.set("py:nx", "c", xx=True, get=True), b"a")
    check("getdel", (r.getdel("py:nx"), r.get("py:nx")), (b"c", None))
    check("empty string exists", (r.set("py:e", ""), r.exists("py:e"), r.get("py:e")), (True, 1, b""))
    check("append", (r.append("py:ap", "Hello"), r.append("py:ap", " World")), (5, 11))
    check("setrange", (r.setrange("py:ap", 6, "Redis"), r.get("py:ap")), (11, b"Hello Redis"))
    check("incrbyfloat", (r.incrbyfloat("py:f", 10.5), r.incrbyfloat("py:f", 0.1)), (10.5, 10.6))
    check("client name", (r.client_setname("py-check"), r.client_getname()), (True, "py-check"))

    pipe = r.pipeline(transaction=True)
    pipe.set("py:from", "90").incrby("py:to", 10).get("py:from")
    check("multi/exec", pipe.execute(), [True, 10, b"90"])

    for args, text in [
        (("INCRBY", "py:n", "x"), "value is not an integer or out of range"),
        (("INCR", "py:ap"), "value is not an integer or out of range"),
        (("GET",), "wrong number of arguments for 'get' command"),
        (("NOSUCH", "a"), "unknown command 'NOSUCH'"),
    ]:
        try:
            r.execute_command(*args)
            raise SystemExit(f"FAIL {args}: no error")
        except redis.ResponseError as e:
            check(f"error for {args[0]}", text in str(e), True)

    threads, each = 8, 25

    def bump():
        c = redis.Redis(port=port, socket_timeout=30)
        for _ in range(each):
            c.incr("py:hot")

    run_threads(bump, threads)
    check("concurrent incr", r.get("py:hot"), str(threads * each).encode())

    # redis-py's check-and-set helper: WATCH, read, MULTI, write, EXEC,
    # retried on a WatchError.
    def cas_loop():
        c = redis.Redis(port=port, socket_timeout=30)

        def step(pipe):
            current = int(pipe.get("py:cas") or 0)
            pipe.multi()
            pipe.set("py:cas", current + 1)

        for _ in range(each):
            c.transaction(step, "py:cas")

    run_threads(cas_loop, threads)
    check("WATCH check-and-set", r.get("py:cas"), str(threads * each).encode())
    print("redis-py: all checks passed")


main()
