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

  def test_ctrl_c_asks_once_then_interrupts(self):
    with preemption.Notice() as notice:
      os.kill(os.getpid(), signal.SIGINT)
      self.assertEqual(notice.signal, signal.SIGINT)
      with self.assertRaises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
    self.assertIs(signal.getsignal(signal.SIGINT), signal.default_int_handler)


if __name__ == "__main__":
  absltest.main()
