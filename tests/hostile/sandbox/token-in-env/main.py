import json, os


def run():
    with open("params.json") as f:
        cfg = json.load(f)
    return {"token": os.environ.get("SKILLGROVE_TOKEN"), "mail": os.environ.get("SMTP_PASSWORD")}
