#!/usr/bin/env python3
"""tests/integration/socket_peer.py: the other end of socket_source in
tests/integration/sockets.sh (python3's standard library only).

  send HOST PORT FILE [length]   one TCP connection: FILE's bytes (line), or
                                 each line of FILE as a 4-byte big-endian
                                 length and its bytes without '\\n' (length)
  many HOST PORT N LINES         N connections at once, each sends LINES
                                 lines "c<i>-<n>"
  udp HOST PORT FILE PER         FILE's lines, PER to a datagram ('\\n'
                                 between them, none after the last)
  udplen HOST PORT FILE PER      the same as length frames
  hold HOST PORT N READY STOP    N connections held open, each sends "held";
                                 writes READY when they are connected; closes
                                 them and exits once the file STOP exists
  probe HOST PORT                connects, waits up to 10 s: prints
                                 "closed" if the server closes it, else "open"
  serve PORTFILE FILE            listens on 127.0.0.1:0 (writes the port to
                                 PORTFILE), accepts one connection, sends
                                 FILE's bytes, closes
  blast HOST PORT LINES WIDTH PROGRESS
                                 sends LINES lines of WIDTH bytes ("n" padded
                                 with '.'), writing the bytes sent so far to
                                 PROGRESS every 0.1 s, "done N" at the end
  freeport                       prints a free TCP port of 127.0.0.1
"""
import os
import socket
import struct
import sys
import threading
import time


def connect(host, port):
    for _ in range(100):
        try:
            return socket.create_connection((host, int(port)), timeout=30)
        except ConnectionRefusedError:
            time.sleep(0.05)
    raise SystemExit("cannot connect to %s:%s" % (host, port))


def lines_of(path):
    with open(path, "rb") as f:
        return f.read().split(b"\n")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "send":
        host, port, path = args[:3]
        s = connect(host, port)
        if len(args) > 3 and args[3] == "length":
            data = b"".join(struct.pack(">I", len(l)) + l for l in lines_of(path)[:-1])
        else:
            data = open(path, "rb").read()
        s.sendall(data)
        s.close()
    elif cmd == "many":
        host, port, n, lines = args[0], args[1], int(args[2]), int(args[3])
        socks = [connect(host, port) for _ in range(n)]

        def send(i):
            socks[i].sendall(b"".join(b"c%d-%d\n" % (i, k) for k in range(lines)))
            socks[i].close()

        ts = [threading.Thread(target=send, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    elif cmd in ("udp", "udplen"):
        host, port, path, per = args[0], int(args[1]), args[2], int(args[3])
        ls = lines_of(path)[:-1]
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for i in range(0, len(ls), per):
            part = ls[i:i + per]
            if cmd == "udp":
                d = b"\n".join(part)
            else:
                d = b"".join(struct.pack(">I", len(l)) + l for l in part)
            s.sendto(d, (host, port))
            time.sleep(0.001)
    elif cmd == "hold":
        host, port, n, ready, stop = args[0], args[1], int(args[2]), args[3], args[4]
        socks = [connect(host, port) for _ in range(n)]
        for s in socks:
            s.sendall(b"held\n")
        open(ready, "w").write("ok\n")
        for _ in range(1200):
            if os.path.exists(stop):
                break
            time.sleep(0.05)
        for s in socks:
            s.close()
    elif cmd == "probe":
        s = connect(args[0], args[1])
        s.settimeout(10)
        try:
            print("closed" if s.recv(1) == b"" else "data")
        except socket.timeout:
            print("open")
        except ConnectionResetError:
            print("closed")
    elif cmd == "serve":
        portfile, path = args
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        ls.settimeout(60)
        open(portfile, "w").write("%d\n" % ls.getsockname()[1])
        c, _ = ls.accept()
        c.sendall(open(path, "rb").read())
        c.close()
        ls.close()
    elif cmd == "blast":
        host, port, n, width, progress = args[0], args[1], int(args[2]), int(args[3]), args[4]
        s = connect(host, port)
        sent = [0]
        done = [False]

        def report():
            while not done[0]:
                open(progress, "w").write("%d\n" % sent[0])
                time.sleep(0.1)

        t = threading.Thread(target=report)
        t.start()
        chunk = []
        try:
            for k in range(n):
                chunk.append((b"%d" % k).ljust(width - 1, b".") + b"\n")
                if len(chunk) == 64 or k == n - 1:
                    b = b"".join(chunk)
                    s.sendall(b)
                    sent[0] += len(b)
                    chunk = []
            s.close()
        finally:
            # also when the job resets the connection: the reporter must end
            done[0] = True
            t.join()
        open(progress, "w").write("done %d\n" % sent[0])
    elif cmd == "freeport":
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        print(s.getsockname()[1])
        s.close()
    else:
        raise SystemExit("unknown command " + cmd)


main()
