"""recipes/setting_types.py: each value against its type, one ConfigError line naming
the setting; good values (numpy integers as a sweep passes them) accepted."""

import dataclasses
from typing import Callable, Optional, Sequence

from absl.testing import absltest
import numpy as np

from recipes import setting_types
from recipes.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Toy:
  count: int = 1
  rate: float = 0.1
  flag: bool = False
  name: Optional[str] = None
  sizes: Sequence[int] = (1, 2)
  make: Callable = dict


class SettingTypesTest(absltest.TestCase):

  def test_whole_and_number(self):
    setting_types.whole("A.n", 3, 1)
    setting_types.whole("A.n", np.int64(3), 1)
    setting_types.whole("A.n", None, 1, allow_none=True)
    for bad, pattern in ((0, r"A.n=0 must be a whole number >= 1$"), (2.5, "A.n=2.5"),
                         (True, "A.n=True"), (None, "A.n=None")):
      with self.assertRaisesRegex(ConfigError, pattern):
        setting_types.whole("A.n", bad, 1)
    setting_types.number("A.x", 0.0, 0)
    with self.assertRaisesRegex(ConfigError, r"A.x=0.0 must be a number > 0$"):
      setting_types.number("A.x", 0.0, 0, strict=True)
    with self.assertRaisesRegex(ConfigError, "A.x='1' must be a number >= 0"):
      setting_types.number("A.x", "1", 0)

  def test_check_fields_names_the_field_and_its_type(self):
    setting_types.check_fields(Toy())
    setting_types.check_fields(Toy(count=np.int32(2), rate=1, name="x", sizes=[3]))
    for field, value, pattern in (
        ("count", "2", r"Toy.count='2' must be a whole number; fix its Gin binding"),
        ("rate", "0.1", "Toy.rate='0.1' must be a number"),
        ("flag", "yes", "Toy.flag='yes' must be True or False"),
        ("name", 3, "Toy.name=3 must be a string or None"),
        ("sizes", "12", "Toy.sizes='12' must be a list or tuple"),
        ("sizes", (1, "2"), r"Toy.sizes\[1\]='2' must be a whole number"),
        ("make", "dict", "Toy.make='dict' must be a configurable reference")):
      with self.assertRaisesRegex(ConfigError, pattern):
        setting_types.check_fields(Toy(**{field: value}))


if __name__ == "__main__":
  absltest.main()
