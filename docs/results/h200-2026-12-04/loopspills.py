#!/usr/bin/env python3
"""Per tiled kernel of a cuobjdump -sass listing: STL / LDL between a backward
branch and its target, CALL.ABS count, instruction count.

    cuobjdump -sass probe.cubin > probe.sass && python loopspills.py probe.sass
"""
import re,sys
txt=open(sys.argv[1]).read()
for f in re.split(r'\n\s*Function : ', txt)[1:]:
    name=f.split('\n',1)[0]
    m=re.search(r'TiledTraitsILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELi(\d+).*?MmaKindE(\d)ELNS\d_8PipelineE(\d)',name)
    if not m: continue
    ins=[(int(a,16),i) for a,i in re.findall(r'/\*([0-9a-f]{4,})\*/\s+(.*?);',f)]
    loops=[]
    for a,i in ins:
        b=re.search(r'\bBRA\b.*?(0x[0-9a-f]+)',i)
        if b and int(b.group(1),16)<a: loops.append((int(b.group(1),16),a))
    inl=lambda a: any(s<=a<=e for s,e in loops)
    st=sum(1 for a,i in ins if re.search(r'\bSTL',i) and inl(a)); ld=sum(1 for a,i in ins if re.search(r'\bLDL',i) and inl(a))
    calls=sum(1 for a,i in ins if 'CALL.ABS' in i)
    print(m.groups(), f"in-loop STL {st} LDL {ld}, calls {calls}, instructions {len(ins)}")
