def run():
    return {"who": "victim"}
