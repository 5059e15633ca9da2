"""The preemption notice: SIGTERM recorded while entered, the old handler back after."""

import os
import signal

from absl.testing import absltest

from recipes import preemption


class NoticeTest(absltest.TestCase):

  def test_sigterm_is_recorded_not_fatal(self):
    before = signal.getsignal(signal.SIGTERM)
    with preemption.Notice() as notice:
      self.assertFalse(notice.requested)
      os.kill(os.getpid(), signal.SIGTERM)  # delivered before kill() returns
      self.assertTrue(notice.requested)
      self.assertEqual(notice.signal, signal.SIGTERM)
    self.assertIs(signal.getsignal(signal.SIGTERM), before)


if __name__ == "__main__":
  absltest.main()
