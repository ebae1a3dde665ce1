from helper import go

def run():
    return go()
