"""The seesaw block's arithmetic (attention_seesaw.cuh), one query row in
float64, against softmax(S) V: the pair schedule, the lazy rescale
(SoftmaxState::rescale_lazy, 8 in the log2 domain), the max handed from
the first warpgroup to the second and back, an odd last tile, a sink.
Scores are in the log2 domain, as the kernel keeps them. Column 0 of V
stands for the first warpgroup's half of O, column 1 for the second's.

    python3 seesaw_model.py
"""
import numpy as np
rng=np.random.default_rng(0)
NEG=-np.inf
def rescale_lazy(mx, tile_max, lazy=True):
    if lazy and mx!=NEG and tile_max-mx<=8: return mx,1.0
    new=max(mx,tile_max); f=1.0 if new==NEG else 2.0**(mx-new)
    return new,f
def run(S, V, sink=None):
    """S: [tiles][keys] scores of one row; V: [tiles][keys][2]."""
    T=len(S)
    m0, l0 = (sink,1.0) if sink is not None else (NEG,0.0)
    m1, l1 = NEG, 0.0
    OL=0.0; OR=0.0
    p=0
    while 2*p < T:
        j0=2*p; has1 = 2*p+1 < T
        # WG0
        s=S[j0]; mx, f0 = rescale_lazy(m0, s.max()); l0*=f0  # rescale returns factor applied to sum
        P0=2.0**(s-(mx if mx!=NEG else 0)); l0+=P0.sum()
        mnew0=mx
        OL=OL*f0 + P0@V[j0][:,0]
        # WG1
        l1*=f0; OR=OR*f0
        if has1:
            s1=S[j0+1]; mx1,f1=rescale_lazy(mnew0, s1.max()); l1*=f1
            P1=2.0**(s1-(mx1 if mx1!=NEG else 0)); l1+=P1.sum()
            OR=OR*f1 + P1@V[j0+1][:,1]
            # WG0 continues
            m0=mx1; l0*=f1; P0=P0*f1
            OL=OL*f1 + P1@V[j0+1][:,0]
        else:
            f1=1.0; m0=mnew0
        OR=OR + P0@V[j0][:,1]
        p+=1
    l=l0+l1
    return OL/l, OR/l
for trial in range(200):
    T=rng.integers(1,9); bn=4
    S=[rng.normal(0,rng.choice([1,5,20]),bn)+rng.choice([0,30]) * (i/ max(T,1)) for i in range(T)]
    V=[rng.normal(size=(bn,2)) for _ in range(T)]
    sink = rng.normal() if trial%3==0 else None
    allS=np.concatenate(S); allV=np.concatenate(V)
    logits=allS*np.log(2)
    if sink is not None: logits=np.concatenate([logits,[sink*np.log(2)]]); allV=np.concatenate([allV,np.zeros((1,2))])
    w=np.exp(logits-logits.max()); w/=w.sum()
    ref=w@allV
    got=run(S,V,sink)
    assert np.allclose(got,ref,rtol=1e-9,atol=1e-12),(trial,got,ref)
print("seesaw model matches softmax(S) V on 200 random cases")
