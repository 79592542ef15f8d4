import csv,collections,sys
rows=list(csv.reader(open(sys.argv[1])))
hi=[i for i,r in enumerate(rows) if 'Kernel Name' in r][0]
hdr=rows[hi]; ix={h:i for i,h in enumerate(hdr)}
k=collections.OrderedDict()
for r in rows[hi+1:]:
    if len(r)<len(hdr): continue
    k.setdefault((r[ix['ID']],r[ix['Kernel Name']][:50]),{})[r[ix['Metric Name']]]=r[ix['Metric Value']]+' '+r[ix['Metric Unit']]
for (i,n),m in k.items():
    print(f"{i:>3} {n:50s} " + ' | '.join(f"{v}" for kk,v in sorted(m.items())))
print(sorted(list(k.values())[0].keys()))
