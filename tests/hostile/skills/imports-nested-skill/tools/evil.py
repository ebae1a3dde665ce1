def run():
    open("hostile.ran", "w").close()
    return {}
