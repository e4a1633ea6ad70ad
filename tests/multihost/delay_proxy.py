"""A TCP proxy that delays what passes through it, per client host: the harness's slow link (this
kernel has no netem). faults.py runs it on the coordinator's host, between the workers and mapd.

  delay_proxy.py --listen HOST:PORT --to HOST:PORT

Commands on stdin, one a line:
  delay ADDRESS SECONDS   every byte to or from clients at ADDRESS arrives SECONDS later (0: none);
                          bytes keep their order, and a connection's two directions are delayed alike
Prints "listening" once it listens; exits when stdin closes.
"""
import argparse
import asyncio
import sys
import time

delays = {}  # client address -> seconds


async def pipe(reader, writer, client):
    """Copies reader to writer, each chunk held until `delay` after it was read (a link's latency,
    not its bandwidth: chunks in flight overlap)."""
    queue = asyncio.Queue()

    async def send():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.ensure_future(send())
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            queue.put_nowait((time.monotonic() + delays.get(client, 0.0), data))
        queue.put_nowait((0, None))
        await sender
    except (ConnectionError, OSError):
        pass
    finally:
        sender.cancel()
        writer.close()


async def serve(to_host, to_port, client_reader, client_writer):
    client = client_writer.get_extra_info("peername")[0]
    try:
        up_reader, up_writer = await asyncio.open_connection(to_host, to_port)
    except OSError:
        client_writer.close()
        return
    await asyncio.gather(pipe(client_reader, up_writer, client), pipe(up_reader, client_writer, client))


async def commands():
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        parts = line.split()
        if len(parts) == 3 and parts[0] == "delay":
            delays[parts[1]] = float(parts[2])


async def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", required=True)
    p.add_argument("--to", required=True)
    args = p.parse_args()
    host, port = args.listen.rsplit(":", 1)
    to_host, to_port = args.to.rsplit(":", 1)
    server = await asyncio.start_server(lambda r, w: serve(to_host, int(to_port), r, w), host, int(port))
    print("listening", flush=True)
    async with server:
        await commands()


if __name__ == "__main__":
    asyncio.run(main())
