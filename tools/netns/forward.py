"""A small TCP forwarder for the reachability test: accepts on LISTEN_HOST:LISTEN_PORT and pipes each
connection to TARGET_HOST:TARGET_PORT. Started inside or outside a network namespace by tools/netns/up."""
import os, signal, socket, sys, threading


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(listen_host, listen_port, target_host, target_port):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((listen_host, listen_port))
    server.listen(64)
    print("READY", flush=True)
    while True:
        client, _ = server.accept()
        try:
            upstream = socket.create_connection((target_host, target_port), timeout=5)
            upstream.settimeout(None)
        except OSError:
            client.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=pipe, args=(a, b), daemon=True).start()


if __name__ == "__main__":
    # Started from a test process: drop every inherited descriptor but 0-2 (a pipe held open here
    # would keep the test waiting for EOF) and undo an inherited signal mask (SIGTERM must work).
    os.closerange(3, 4096)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
