"""A small TCP forwarder for the reachability test: accepts on LISTEN_HOST:LISTEN_PORT and pipes each
connection to TARGET_HOST:TARGET_PORT. Started inside or outside a network namespace by tools/netns/up."""
import os, signal, socket, sys, threading, time


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
        threading.Thread(target=connect, args=(client, target_host, target_port), daemon=True).start()


def connect(client, target_host, target_port):
    # The target is the test IdP (Django's runserver, a listen backlog of 10) while the whole suite
    # runs on two cores: a dropped SYN is retried by the kernel after 1 s and 3 s, so a single 5 s
    # attempt can fail under load. Keep trying for 20 s, and say why in the log when it still fails.
    deadline = time.monotonic() + 20
    while True:
        try:
            upstream = socket.create_connection((target_host, target_port), timeout=10)
            upstream.settimeout(None)
            break
        except OSError as error:
            if time.monotonic() >= deadline:
                print(f"connect {target_host}:{target_port} failed: {error}", flush=True)
                client.close()
                return
            print(f"connect {target_host}:{target_port}: {error}; retrying", flush=True)
            time.sleep(0.2)
    for a, b in ((client, upstream), (upstream, client)):
        threading.Thread(target=pipe, args=(a, b), daemon=True).start()


if __name__ == "__main__":
    # Started from a test process: drop every inherited descriptor but 0-2 (a pipe held open here
    # would keep the test waiting for EOF) and undo an inherited signal mask (SIGTERM must work).
    os.closerange(3, 4096)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
