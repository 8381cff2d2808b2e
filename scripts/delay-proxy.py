#!/usr/bin/env python3
"""A bucket far away, on loopback: a TCP proxy that delays every chunk by --delay-ms in each
direction and holds a new connection for one round trip before its first byte goes through (what
a TCP handshake costs; TLS would cost more). These machines have no netem.

    delay-proxy.py --target 127.0.0.1:9199 --delay-ms 10 [--port 0]

Prints "port N" on its first line, then serves until killed (SIGTERM); on exit it prints
"connections N" (how many connections it accepted). Only loopback targets are allowed.
"""
import argparse
import asyncio
import signal
import sys
import time

accepted = 0


async def pump(reader, writer, delay):
    """Copies reader to writer, each chunk sent `delay` seconds after it arrived, in order."""
    queue = asyncio.Queue()

    async def receive():
        while True:
            data = await reader.read(256 * 1024)
            await queue.put((time.monotonic() + delay, data))
            if not data:
                return

    async def send():
        while True:
            due, data = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                try:
                    writer.write_eof()
                except (OSError, RuntimeError):
                    pass
                return
            writer.write(data)
            await writer.drain()

    try:
        await asyncio.gather(receive(), send())
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def serve(args):
    host, port = args.target.rsplit(":", 1)
    if host not in ("127.0.0.1", "localhost", "::1", "[::1]") and not host.startswith("127."):
        sys.exit("delay-proxy: only loopback targets")
    delay = args.delay_ms / 1000.0

    async def handle(client_reader, client_writer):
        global accepted
        accepted += 1
        # A new connection's first byte waits one round trip (the handshake).
        await asyncio.sleep(2 * delay)
        try:
            server_reader, server_writer = await asyncio.open_connection(host.strip("[]"), int(port))
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            pump(client_reader, server_writer, delay), pump(server_reader, client_writer, delay))

    server = await asyncio.start_server(handle, "127.0.0.1", args.port)
    print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    if args.seconds:
        loop.call_later(args.seconds, stop.set)
    async with server:
        await stop.wait()
    print(f"connections {accepted}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=3600, help="stop by itself after this long")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
