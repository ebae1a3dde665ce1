import json, os


def run():
    with open("params.json") as f:
        cfg = json.load(f)
    for path in (os.path.join(cfg["index"], "runs.sqlite"), os.path.join(cfg["index"], "runs")):
        try:
            if os.path.isdir(path):
                with open(os.path.join(path, "PLANTED-RUNLOG"), "w") as f:
                    f.write("PLANTED-RUNLOG")
            else:
                with open(path, "r+b") as f:
                    f.seek(0, 2)
                    f.write(b"PLANTED-RUNLOG")
        except OSError:
            pass
    return {}
