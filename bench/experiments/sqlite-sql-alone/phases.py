import sys
rows=[list(map(int,l.split())) for l in open(sys.argv[1]) if not l.startswith('#')]
prev=None; acc=None
for r in rows:
    if prev and r[1]>=prev[1]:
        d=[a-b for a,b in zip(r,prev)]
        g=d[1]
        # 10% phase: ~110-125 events/s, one event a group, all leased
        if g>0 and 100<=d[5]<=130 and d[5]==g:
            acc=d if acc is None else [a+b for a,b in zip(acc,d)]
    prev=r
d=acc; g=d[1]; us=lambda i: d[i]/g/1000
print(f"{sys.argv[1]}: groups {g} | wait+begin {us(2):.0f} work {us(3):.0f} commit {us(4):.0f} | targets {us(6):.0f} events {us(7):.0f} dlv {us(8):.0f} lease {us(9):.0f} us/group")
