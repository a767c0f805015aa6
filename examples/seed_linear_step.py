from functools import partial

import kiln.core as mx
import kiln.nn as nn
from kiln.utils import tree_map

model = nn.Linear(1024, 3072, bias=True)
params = model.trainable_parameters()
mx.eval(params)

state = [mx.random.state]

@partial(mx.compile, inputs=state, outputs=state)
def step(x, params):
    model.update(tree_map(lambda x: x.astype(mx.bfloat16), params))
    return model(x.astype(mx.float16))

x = mx.random.uniform(shape=(4,512,1024), dtype=mx.bfloat16)
y = step(x, params)
mx.eval(y)
