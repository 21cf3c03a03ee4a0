"""Test-only pieces that let the real Ironic Python Agent run on a test host.

Anvil's real-IPA test (internal/realipa) loads these instead of IPA's own
hardware managers and stand-by extension: IPA's GenericHardwareManager
would inspect and erase the host's real disks, and its stand-by extension
powers the machine off or reboots it. Nothing here touches the host:

* AnvilTestHardwareManager reports one network interface with the MAC the
  test enrolled (so lookup finds the node), no clean steps, IPA's in-band
  deploy step write_image, and a temporary file (ANVIL_IPA_INSTALL_DEVICE)
  as the install device. write_image goes through IPA's real
  standby.prepare_image, so IPA's own image_info validation, download,
  checksum verification and write run against that file.
* SafeStandbyExtension is IPA's stand-by extension with the shutdown
  command (poweroff, reboot) and the clock sync replaced by a log line.
"""

import os

from oslo_log import log

from ironic_python_agent.extensions import base as ext_base
from ironic_python_agent.extensions import standby
from ironic_python_agent import hardware
from ironic_python_agent import netutils
from ironic_python_agent import tls_utils

LOG = log.getLogger(__name__)


def _device():
    # Refuse anything that could be a real disk: only a regular file in a
    # directory the test created qualifies.
    path = os.environ.get('ANVIL_IPA_INSTALL_DEVICE', '')
    if ('/anvil-realipa-' not in path or path.startswith('/dev/')
            or not os.path.isfile(path)):
        raise RuntimeError('ANVIL_IPA_INSTALL_DEVICE must be a regular file '
                           'in an anvil-realipa- directory, got %r' % path)
    return path


class AnvilTestHardwareManager(hardware.HardwareManager):
    """A hardware manager whose hardware is a temporary file."""

    HARDWARE_MANAGER_NAME = 'AnvilTestHardwareManager'
    HARDWARE_MANAGER_VERSION = '1.0'

    def evaluate_hardware_support(self):
        return hardware.HardwareSupport.SERVICE_PROVIDER

    def list_network_interfaces(self):
        return [hardware.NetworkInterface(
            'anvil0', os.environ['ANVIL_IPA_MAC'], ipv4_address='127.0.0.1')]

    def list_hardware_info(self):
        return {'interfaces': self.list_network_interfaces()}

    def wait_for_disks(self):
        return None

    def generate_tls_certificate(self, ip_address):
        # IPA's auto-TLS, as the generic manager does it, but with the
        # files beside the test's install device: IPA's own location
        # (/run/ironic-python-agent) is one per host, and the agents of
        # one test run side by side on one host, as machines never do.
        root = os.path.join(os.path.dirname(_device()), 'tls')
        os.makedirs(root, exist_ok=True)
        cert_path = os.path.join(root, 'agent.crt')
        key_path = os.path.join(root, 'agent.key')
        content = tls_utils._generate_tls_certificate(
            cert_path, key_path, netutils.get_hostname(), ip_address,
            valid_for_days=90)
        return tls_utils.TlsCertificate(content, cert_path, key_path)

    def get_os_install_device(self, permit_refresh=False):
        return _device()

    def get_clean_steps(self, node, ports):
        return []

    def get_deploy_steps(self, node, ports):
        return [{
            'step': 'write_image',
            'priority': 0,
            'interface': 'deploy',
            'reboot_requested': False,
            'abortable': False,
            'argsinfo': {
                'image_info': {'description': 'Image information.',
                               'required': True},
                'configdrive': {'description': 'A config drive.',
                                'required': False},
            },
        }]

    def write_image(self, node, ports, image_info, configdrive=None):
        # As IPA's GenericHardwareManager.write_image: IPA's stand-by
        # extension validates image_info, downloads, verifies and writes.
        ext = ext_base.get_extension('standby')
        cmd = ext.prepare_image(image_info=image_info,
                                configdrive=configdrive)
        return cmd.wait()


class SafeStandbyExtension(standby.StandbyExtension):
    """IPA's stand-by extension that never powers off or reboots the host."""

    def _run_shutdown_command(self, command):
        LOG.warning('anvil test: not running %s on the test host', command)

    def _sync_clock(self, ignore_errors=False):
        LOG.info('anvil test: clock sync skipped')
