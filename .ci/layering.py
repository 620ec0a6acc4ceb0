#!/usr/bin/env python3
# What each top-level module of src/ uses (crate::X and patchdiff::X paths outside #[cfg(test)]
# and comments): python3 .ci/layering.py — to check ARCHITECTURE.md's layering table against the code.
import os,re,collections
tops={}
for e in os.listdir('src'):
    if e.endswith('.rs'): tops[e[:-3]]=['src/'+e]
    elif os.path.isdir('src/'+e) and e!='bin': tops.setdefault(e,[])
for t in list(tops):
    d='src/'+t
    if os.path.isdir(d):
        for dd,_,fs in os.walk(d):
            tops[t]+= [os.path.join(dd,f) for f in fs if f.endswith('.rs')]
uses=collections.defaultdict(set)
for t,files in tops.items():
    for p in files:
        s=open(p).read().split('#[cfg(test)]')[0]
        s=re.sub(r'//[^\n]*','',s)
        for m in re.finditer(r'\bcrate::([a-z_0-9]+)',s):
            u=m.group(1)
            if u!=t and u in tops: uses[t].add(u)
        for m in re.finditer(r'\bpatchdiff::([a-z_0-9]+)',s):
            u=m.group(1)
            if u!=t and u in tops: uses[t].add(u)
for t in sorted(tops): print(t, sorted(uses[t]))
