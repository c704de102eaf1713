"""Count the SASS of a kernel's loops by instruction class: a consumer's kv-tile loop (docs/sm90_attention.md "The
consumer's instructions a kv tile", "Against FlashAttention-3's SASS").

    cuobjdump -sass kernel.cubin > kernel.sass
    python tools/sass_loop_count.py kernel.sass [FUNCTION_SUBSTRING] [--start 0xADDR]

Prints each loop (a backward branch and its body) holding at least two HGMMA, in the order of their backward
branches (an inner loop before the loop around it), its instructions by class. A forward branch inside the loop that
skips a block of >= MASK_BLOCK ``FSEL`` or -inf moves (a causal diagonal's mask, a partial tile's tail) counts as
taken: the block is reported apart, the branch counted.
"""
import argparse
import collections
import re

LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
BRANCH = re.compile(r"\bBRA(?:\.\S+)? 0x([0-9a-f]+)")
MASK_BLOCK = 32
SYNC = {"WARPGROUP", "BAR", "SYNCS", "ISETP", "UISETP", "BRA", "WARPSYNC", "DEPBAR", "NOP", "PLOP3", "UPLOP3", "EXIT",
        "BSSY", "BSYNC", "VOTEU", "VOTE", "ELECT"}
MOVES = {"MOV", "UMOV", "R2UR", "S2UR", "S2R", "CS2R", "UMOV32I", "MOV32I"}
ADDRESS = {"IMAD", "IADD3", "LEA", "LOP3", "SHF", "SEL", "USEL", "UIADD3", "ULEA", "ULOP3", "USHF", "UIMAD", "IMNMX",
           "UIMNMX", "VIADD", "IABS", "PRMT", "UPRMT", "IMUL", "FLO", "POPC", "BMSK", "UBMSK", "SGXT", "USGXT"}
CLASSES = (("HGMMA", lambda o: o.startswith("HGMMA")), ("MUFU.EX2", lambda o: o.startswith("MUFU.EX2")),
           ("MUFU other", lambda o: o.startswith("MUFU")), ("FFMA", lambda o: o.startswith("FFMA")),
           ("FMUL", lambda o: o.startswith("FMUL")), ("FADD", lambda o: o.startswith("FADD")),
           ("FMNMX", lambda o: o.startswith("FMNMX")), ("FSEL/FSETP", lambda o: o.startswith(("FSEL", "FSETP"))),
           ("F2FP (pack)", lambda o: o.startswith("F2FP")), ("SHFL", lambda o: o.startswith("SHFL")),
           ("WARPGROUP/BAR/SYNCS/ISETP/branch", lambda o: o.split(".")[0] in SYNC),
           ("MOV (MOV, UMOV, R2UR, S2UR, CS2R)", lambda o: o.split(".")[0] in MOVES),
           ("address (IMAD, IADD3, LEA, LOP3, SHF, SEL, uniform)", lambda o: o.split(".")[0] in ADDRESS))
SKIPPED = "(block skipped: mask / tail)"


def parse(path):
    """{function name: [(address, instruction text)]} of a ``cuobjdump -sass`` listing."""
    funcs, cur = {}, None
    for raw in open(path):
        m = re.match(r"\s*Function : (\S+)", raw)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = LINE.search(raw)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), m.group(2)))
    return funcs


def opcode(ins):
    return re.sub(r"^@!?U?P\w+\s+", "", ins).split()[0]


def classify(op):
    return next((name for name, test in CLASSES if test(op)), "other:" + op.split(".")[0])


def loops(ins):
    """(start, end, HGMMA count, body) of each backward branch, in the listing's order."""
    index = {a: k for k, (a, _) in enumerate(ins)}
    out = []
    for i, (addr, s) in enumerate(ins):
        m = BRANCH.search(s)
        if m and int(m.group(1), 16) <= addr and int(m.group(1), 16) in index:
            body = ins[index[int(m.group(1), 16)]:i + 1]
            out.append((body[0][0], addr, sum(opcode(b).startswith("HGMMA") for _, b in body), body))
    return out


def masked(inner):
    fsel = sum(opcode(b).startswith("FSEL") for b in inner)
    inf = sum("0xff800000" in b or "-0x800000" in b for b in inner)
    return max(fsel, inf) >= MASK_BLOCK


def count(body):
    """Instructions by class; a forward branch over a mask / tail block counted, the block under SKIPPED."""
    c, skip_until = collections.Counter(), -1
    for addr, s in body:
        if addr < skip_until:
            continue
        m = BRANCH.search(s)
        if m and addr < int(m.group(1), 16) <= body[-1][0]:
            inner = [b for a, b in body if addr < a < int(m.group(1), 16)]
            if masked(inner):
                skip_until = int(m.group(1), 16)
                c[SKIPPED] += len(inner)
        c[classify(opcode(s))] += 1
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sass")
    ap.add_argument("function", nargs="?", default="", help="a substring of the function's mangled name")
    ap.add_argument("--start", default="", help="only the loop starting at this address (hex)")
    args = ap.parse_args()
    for name, ins in parse(args.sass).items():
        if args.function not in name:
            continue
        for start, end, hgmma, body in loops(ins):
            if hgmma < 2 or (args.start and start != int(args.start, 16)):
                continue
            c = count(body)
            total = sum(v for k, v in c.items() if k != SKIPPED)
            print(f"{name[:60]} loop 0x{start:x}-0x{end:x}: {hgmma} HGMMA, {total} instructions")
            for k, v in sorted(c.items(), key=lambda kv: -kv[1]):
                print(f"   {k:52s} {v}")


if __name__ == "__main__":
    main()
