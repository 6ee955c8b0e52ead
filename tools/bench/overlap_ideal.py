#!/usr/bin/env python3
# The best iteration `zps bench --model resnet50 --compute_ms` can reach when the link is the only
# limit and nothing waits in queues: a worker's link sends ready 1 MiB partitions one at a time, by
# priority (forward layer index) or first come first served, and a partition's sum is back the moment
# its push has gone out. Compute C per iteration as in tools/bench/overlap.h (backward 2/3, forward
# 1/3, per layer by parameters); the link needs T for all bytes. Prints iteration / max(C, T) for C = T.
#   tools/bench/overlap_ideal.py
import heapq
# ResNet-50's parameter counts in forward order (tools/bench/model_shapes.cc).
def resnet50():
    t=[]; add=lambda n: t.append(n)
    add(64*3*7*7); add(64); add(64)
    inpl=64
    for layer,blocks in enumerate([3,4,6,3]):
        pl=64<<layer
        for b in range(blocks):
            add(pl*inpl); add(pl); add(pl)
            add(pl*pl*9); add(pl); add(pl)
            add(pl*4*pl); add(pl*4); add(pl*4)
            if b==0: add(pl*4*inpl); add(pl*4); add(pl*4)
            inpl=pl*4
    add(2048*1000); add(1000)
    return t
# The iteration time: partitions of `part` floats, compute C, link time T for all bytes.
def simulate(p, C, T, priority, part=262144):
    P=sum(p); L=len(p)
    ready=[0]*L; acc=0
    for i in reversed(range(L)):
        acc+=p[i]/P*2*C/3; ready[i]=acc
    chunks=[]  # (ready, prio, layer, elems)
    for i in range(L):
        left=p[i]
        while left>0:
            n=min(part,left); chunks.append([ready[i], i, n]); left-=n
    rate=P/T
    done=[0.0]*L; remaining=list(p)
    t=0; pending=sorted(chunks, key=lambda c:c[0])
    queue=[]
    k=0; order=0
    while k<len(pending) or queue:
        while k<len(pending) and pending[k][0]<=t+1e-12:
            c=pending[k]; heapq.heappush(queue,((c[1] if priority else order), order, c)); order+=1; k+=1
        if not queue:
            t=pending[k][0]; continue
        _,_,c=heapq.heappop(queue)
        t+=c[2]/rate
        remaining[c[1]]-=c[2]
        if remaining[c[1]]==0: done[c[1]]=t
    f=2*C/3
    for i in range(L):
        f=max(f,done[i])+p[i]/P*C/3
    return f
p = resnet50()
for prio in (False, True):
    it = simulate(p, 1.0, 1.0, prio)
    print(f"resnet50, compute = communication: {'priority' if prio else 'fifo    '} iteration / max(compute, communication) = {it:.3f}")
