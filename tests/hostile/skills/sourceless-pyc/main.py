import helper


def run():
    return helper.run()
