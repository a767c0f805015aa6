"""nn.Module: a dict of parameters and submodules, with MLX's API.

A module stores its arrays, submodules and lists/dicts of them as dict items
(so a module *is* a pytree the transformations understand) and everything
else (hyperparameters, flags) as ordinary attributes. Every traversal below
is one walk, ``filter_and_map``, with different filters.
"""

import textwrap
from typing import Any, Callable, List, Optional, Tuple, Union

import kiln.core as mx
from kiln.utils import tree_flatten, tree_unflatten


def _is_floating(dtype):
    return mx.issubdtype(dtype, mx.floating)


class Module(dict):
    """Base class of layers and models. Subclasses set attributes in
    ``__init__`` and define ``__call__``."""

    __call__: Callable

    def __init__(self):
        self._no_grad = set()
        self._training = True

    # ---- attributes that are parameters ---------------------------------

    @property
    def training(self):
        """Whether the module is in training mode (dropout active, ...)."""
        return self._training

    @property
    def state(self):
        """The module's state dict: the module itself, so that
        ``compile(..., inputs=model.state, outputs=model.state)`` captures
        its parameters in place."""
        return self

    def __getattr__(self, key: str):
        if key in self:
            return self[key]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {key!r}")

    def __setattr__(self, key: str, val: Any):
        if isinstance(val, (mx.array, dict, list, tuple)):
            # A value that was a plain attribute becomes an item.
            if key in self.__dict__:
                object.__delattr__(self, key)
            self[key] = val
        else:
            if key in self:
                del self[key]
            super().__setattr__(key, val)

    def __delattr__(self, name):
        if name in self:
            del self[name]
        else:
            super().__delattr__(name)

    # MLX modules hash and compare by identity (a dict would not hash).
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def _extra_repr(self) -> str:
        return ""

    def __repr__(self):
        children = tree_flatten(self.children(), is_leaf=self.is_module)
        value = f"{type(self).__name__}({self._extra_repr()}"
        for k, v in children:
            value += "\n" + textwrap.indent(f"({k}): {repr(v)}", "  ")
        if children:
            value += "\n"
        return value + ")"

    # ---- filters ---------------------------------------------------------

    @staticmethod
    def is_module(value):
        return isinstance(value, Module)

    @staticmethod
    def valid_child_filter(module, key, value):
        return isinstance(value, (dict, list))

    @staticmethod
    def valid_parameter_filter(module, key, value):
        return isinstance(value, (dict, list, mx.array)) and not key.startswith("_")

    @staticmethod
    def trainable_parameter_filter(module, key, value):
        return Module.valid_parameter_filter(module, key, value) and key not in module._no_grad

    def filter_and_map(
        self,
        filter_fn: Callable[["Module", str, Any], bool],
        map_fn: Optional[Callable] = None,
        is_leaf_fn: Optional[Callable[["Module", str, Any], bool]] = None,
    ):
        """A dict of this module's items that pass ``filter_fn(module, key,
        value)``, descending into lists, dicts and submodules, with
        ``map_fn`` applied to the leaves."""
        map_fn = map_fn or (lambda x: x)
        is_leaf_fn = is_leaf_fn or (
            lambda m, k, v: not isinstance(v, (Module, dict, list))
        )
        return {
            k: _unwrap(self, k, v, filter_fn, map_fn, is_leaf_fn)
            for k, v in self.items()
            if filter_fn(self, k, v)
        }

    def parameters(self):
        """All arrays of the module and its submodules, as nested dicts and
        lists."""
        return self.filter_and_map(self.valid_parameter_filter)

    def trainable_parameters(self):
        """The parameters that are not frozen."""
        return self.filter_and_map(self.trainable_parameter_filter)

    def children(self):
        """The direct submodules (in the lists and dicts that hold them)."""
        return self.filter_and_map(
            self.valid_child_filter,
            is_leaf_fn=lambda m, k, v: isinstance(v, Module),
        )

    def leaf_modules(self):
        """The submodules that have no submodules."""

        def is_leaf_module(m, k, v):
            return isinstance(v, Module) and len(tree_flatten(v.children())) == 0

        return self.filter_and_map(self.valid_child_filter, is_leaf_fn=is_leaf_module)

    def named_modules(self):
        """``(path, module)`` for this module and every submodule, the module
        itself first with path ``""``."""
        stack = [("", self)]
        out = []
        while stack:
            prefix, module = stack.pop()
            out.append((prefix, module))
            for path, child in tree_flatten(module.children(), is_leaf=self.is_module):
                stack.append((f"{prefix}.{path}" if prefix else path, child))
        return out

    def modules(self):
        """This module and every submodule."""
        return [m for _, m in self.named_modules()]

    # ---- updates ---------------------------------------------------------

    def update(self, parameters: dict, strict: bool = True) -> "Module":
        """Replace parameters with the arrays of ``parameters`` (a nested
        dict/list like the one ``parameters()`` returns). With ``strict``,
        every key must name an existing parameter."""
        _update_tree(self, parameters, strict, "parameter", _is_parameter_slot)
        return self

    def update_modules(self, modules: dict, strict: bool = True) -> "Module":
        """Replace submodules with those of ``modules`` (nested like
        ``children()``)."""
        _update_tree(self, modules, strict, "module", _is_module_slot)
        return self

    def apply(
        self,
        map_fn: Callable[[mx.array], mx.array],
        filter_fn: Optional[Callable[["Module", str, Any], bool]] = None,
    ) -> "Module":
        """Map ``map_fn`` over the parameters (those passing ``filter_fn``,
        all by default) and write the results back."""
        filter_fn = filter_fn or Module.valid_parameter_filter
        self.update(self.filter_and_map(filter_fn, map_fn))
        return self

    def apply_to_modules(self, apply_fn: Callable[[str, "Module"], Any]) -> "Module":
        """Call ``apply_fn(path, module)`` for this module and every
        submodule."""
        for path, module in self.named_modules():
            apply_fn(path, module)
        return self

    # ---- freezing --------------------------------------------------------

    def _validate_keys(self, keys, strict):
        keys = keys if isinstance(keys, list) else [keys]
        if strict:
            for k in keys:
                if k not in self:
                    raise KeyError(f"Module doesn't contain member {k}.")
        return keys

    def _validate_keys_recursive(self, keys):
        keys = keys if isinstance(keys, list) else [keys]
        modules = self.modules()
        for k in keys:
            if not any(k in m for m in modules):
                raise KeyError(f"Module doesn't contain member {k}.")

    def _set_frozen(self, frozen, recurse, keys, strict):
        if recurse and strict and keys is not None:
            # A key such as "bias" must exist somewhere in the model, not in
            # every submodule (a Linear without bias has none).
            self._validate_keys_recursive(keys)
            strict = False

        def apply(path, module):
            if keys is None:
                names = _own_parameter_keys(module)
            else:
                names = module._validate_keys(keys, strict)
            if frozen:
                module._no_grad.update(names)
            else:
                module._no_grad.difference_update(names)

        if recurse:
            self.apply_to_modules(apply)
        else:
            apply("", self)
        return self

    def freeze(
        self,
        *,
        recurse: bool = True,
        keys: Optional[Union[str, List[str]]] = None,
        strict: bool = False,
    ) -> "Module":
        """Exclude parameters from ``trainable_parameters`` (all of them, or
        the named ``keys``), in submodules too when ``recurse``."""
        return self._set_frozen(True, recurse, keys, strict)

    def unfreeze(
        self,
        *,
        recurse: bool = True,
        keys: Optional[Union[str, List[str]]] = None,
        strict: bool = False,
    ) -> "Module":
        """Undo ``freeze`` for all parameters or the named ``keys``."""
        return self._set_frozen(False, recurse, keys, strict)

    # ---- modes and dtypes ------------------------------------------------

    def _set_training_mode(self, mode: bool) -> None:
        self._training = mode

    def train(self, mode: bool = True) -> "Module":
        """Set training mode on this module and every submodule."""
        self.apply_to_modules(lambda _, m: m._set_training_mode(mode))
        return self

    def eval(self) -> "Module":
        """Set evaluation mode (``train(False)``)."""
        return self.train(False)

    def set_dtype(
        self,
        dtype: mx.Dtype,
        predicate: Optional[Callable[[mx.Dtype], bool]] = _is_floating,
    ):
        """Cast the parameters whose dtype satisfies ``predicate`` (floating
        point by default) to ``dtype``."""
        predicate = predicate or (lambda _: True)
        self.apply(lambda x: x.astype(dtype) if predicate(x.dtype) else x)

    # ---- weights on disk -------------------------------------------------

    def load_weights(
        self,
        file_or_weights: Union[str, List[Tuple[str, mx.array]]],
        strict: bool = True,
    ) -> "Module":
        """Set the parameters from a ``.npz`` or ``.safetensors`` file or a
        list of ``(path, array)`` pairs. With ``strict``, the weights must
        match the parameters exactly in names and shapes."""
        weights = file_or_weights
        if isinstance(weights, str) or hasattr(weights, "__fspath__"):
            weights = list(mx.load(str(weights)).items())
        if not isinstance(weights, (list, tuple)):
            raise TypeError(
                "load_weights: expected a file path or a list of (name, array) "
                f"pairs, got {type(file_or_weights).__name__}."
            )
        if strict:
            new = dict(weights)
            current = dict(tree_flatten(self.parameters()))
            extra = sorted(set(new) - set(current))
            if extra:
                raise ValueError(f"Received {len(extra)} parameters not in model: \n{', '.join(extra)}.")
            missing = sorted(set(current) - set(new))
            if missing:
                raise ValueError(f"Missing {len(missing)} parameters: \n{', '.join(missing)}.")
            for k, v in current.items():
                w = new[k]
                if not isinstance(w, mx.array):
                    raise ValueError(f"Expected mx.array but received {type(w)} for parameter {k}")
                if tuple(w.shape) != tuple(v.shape):
                    raise ValueError(
                        f"Expected shape {tuple(v.shape)} but received shape "
                        f"{tuple(w.shape)} for parameter {k}"
                    )
        if weights:
            self.update(tree_unflatten(list(weights)), strict=False)
        return self

    def save_weights(self, file: str):
        """Save the parameters to ``.npz`` or ``.safetensors`` (by the
        file's extension)."""
        params = dict(tree_flatten(self.parameters()))
        name = str(file)
        if name.endswith(".npz"):
            mx.savez(name, **params)
        elif name.endswith(".safetensors"):
            mx.save_safetensors(name, params)
        else:
            raise ValueError(
                f"save_weights: unsupported file extension in {name!r}; use .npz or .safetensors."
            )


def _unwrap(model, value_key, value, filter_fn, map_fn, is_leaf_fn):
    if is_leaf_fn(model, value_key, value):
        return map_fn(value)
    if isinstance(value, Module):
        return {
            k: _unwrap(value, k, v, filter_fn, map_fn, is_leaf_fn)
            for k, v in value.items()
            if filter_fn(value, k, v)
        }
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = f"{value_key}.{k}"
            # Inside a container a filtered-out item leaves an empty
            # placeholder, so indices and keys keep their meaning.
            keep = filter_fn(model, key, v)
            out[k] = _unwrap(model, key, v, filter_fn, map_fn, is_leaf_fn) if keep else {}
        return out
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value):
            key = f"{value_key}.{i}"
            keep = filter_fn(model, key, v)
            out.append(_unwrap(model, key, v, filter_fn, map_fn, is_leaf_fn) if keep else {})
        return out
    raise RuntimeError("filter_and_map: unexpected leaf; is_leaf_fn must accept it.")


def _own_parameter_keys(module):
    """Keys of the parameters a module holds itself (not through a
    submodule)."""
    def holds_module(v):
        return any(
            isinstance(leaf, Module)
            for _, leaf in tree_flatten(v, is_leaf=Module.is_module)
        )

    return [
        k
        for k, v in module.items()
        if module.valid_parameter_filter(module, k, v) and not holds_module(v)
    ]


def _is_placeholder(value):
    """The empty dict or list that filter_and_map leaves for an item it
    filtered out; updating with it changes nothing."""
    return isinstance(value, (dict, list)) and len(value) == 0 and not isinstance(value, Module)


def _is_parameter_slot(current, new):
    return isinstance(new, mx.array)


def _is_module_slot(current, new):
    return isinstance(new, Module)


def _update_tree(dst, src, strict, what, is_leaf):
    """Write the leaves of ``src`` into the matching slots of ``dst`` (a
    module, dict or list), recursing through containers."""
    if isinstance(src, dict):
        for k, new in src.items():
            if k not in dst:
                if strict:
                    raise ValueError(f'Module does not have {what} named "{k}".')
                continue
            cur = dst[k]
            if _is_placeholder(new):
                continue
            if is_leaf(cur, new):
                if strict and what == "module" and not isinstance(cur, Module):
                    raise ValueError(f'Received a module for "{k}", which holds no module.')
                dst[k] = new
            elif isinstance(new, (dict, list)) and isinstance(cur, (dict, list)):
                _update_tree(cur, new, strict, what, is_leaf)
            elif strict:
                raise ValueError(
                    f'Received invalid type {type(new).__name__} for {what} "{k}".'
                )
    elif isinstance(src, list):
        if not isinstance(dst, list):
            if strict:
                raise ValueError(f"Received a list for a {what} slot that is not a list.")
            return
        for i, new in enumerate(src):
            if i >= len(dst):
                if strict:
                    raise ValueError(f"Module does not have {what} at index {i}.")
                continue
            cur = dst[i]
            if _is_placeholder(new):
                continue
            if is_leaf(cur, new):
                dst[i] = new
            elif isinstance(new, (dict, list)) and isinstance(cur, (dict, list)):
                _update_tree(cur, new, strict, what, is_leaf)
            elif strict:
                raise ValueError(
                    f"Received invalid type {type(new).__name__} for {what} at index {i}."
                )
    elif strict:
        raise ValueError(f"update: expected a dict of {what}s, got {type(src).__name__}.")
