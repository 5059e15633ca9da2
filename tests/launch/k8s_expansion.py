"""Kubernetes' expansion of a container's command and args, as the kubelet does it
(kubernetes third_party/forked/golang/expansion): `$$` is `$`; `$(NAME)` is NAME's value
where the container defines it, left as written where not; any other `$` stays."""


def expand(text, env):
  """`text` as the container receives it, given the container's `env` (a dict)."""
  out, i = [], 0
  while i < len(text):
    if text.startswith("$$", i):
      out.append("$")
      i += 2
    elif text.startswith("$(", i) and ")" in text[i:]:
      end = text.index(")", i)
      out.append(env.get(text[i + 2:end], text[i:end + 1]))
      i = end + 1
    else:
      out.append(text[i])
      i += 1
  return "".join(out)
