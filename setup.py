"""Packaging for driver_kit (the toolkit) and lvm_driver (its reference driver)."""

from setuptools import find_packages, setup

setup(
    name="driver-kit",
    version="0.1.0",
    description="A storage-driver toolkit with Cinder-compliant capacity stats and an "
                "LVM thin-pool reference driver",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.11",
    packages=find_packages(include=["driver_kit", "driver_kit.*", "lvm_driver",
                                    "lvm_driver.*", "contrib", "contrib.*"]),
    install_requires=[
        "oslo.concurrency>=5.0,<8",
        "oslo.config>=9.0,<11",
        # the LVM driver's privileged daemon, when it runs unprivileged (lvm_driver.privileged)
        "oslo.privsep>=3.0,<4",
        "psutil>=5.9,<8",
        "platformdirs>=3.0,<5",
        # the command line: shell completion, progress of long work on a terminal
        "argcomplete>=3.0,<4",
        "rich>=13,<16",
    ],
    # PEP 561: both packages ship their type hints to a vendor's type checker
    package_data={"driver_kit": ["py.typed"], "lvm_driver": ["py.typed"]},
    extras_require={
        # cross-host admission (coordination_backend_url): etcd reservations through
        # etcd3gw; redis, zookeeper and file URLs through tooz locks
        "coordination": ["tooz>=6.0,<11", "etcd3gw>=2.0,<3"],
        # a driver author's harness: the pytest plugin and the testtools TestCase
        "harness": ["pytest>=7.0,<10", "testtools>=2.5,<3"],
        "test": [
            "pytest>=7.0,<10",
            "testtools>=2.5,<3",
            "hypothesis>=6.0,<7",
            "prometheus-client>=0.17,<1",
            # the rootwrap filters (the privileged daemon's start) are proven with
            # oslo.rootwrap's own matcher
            "oslo.rootwrap>=7.0,<8",
            # mutation testing of the compliance harness (tests/mutation)
            "cosmic-ray>=8.7,<9",
            # a hung test fails with its stack instead of holding the run until CI's limit
            "pytest-timeout>=2.1,<3",
            # the Cinder deployment test (tests/ecosystem/test_cinder_deployment.py):
            # cinder-api under gunicorn, MariaDB through PyMySQL, the user's clients
            "gunicorn>=21,<28",
            "PyMySQL>=1.0,<2",
            "python-openstackclient>=7,<11",
            "python-cinderclient>=9,<10",
        ],
        # pyparsing 3.3.3 breaks Cinder's filter and goodness functions (its
        # infix_notation regression, pyparsing#672); OpenStack pins 3.3.2
        "cinder": ["cinder>=25", "pyparsing!=3.3.3"],
        "exporter": ["prometheus-client>=0.17,<1"],
    },
    # the root helper's one filter, the privileged daemon's start: copy into cinder's
    # rootwrap.d (docs/cinder.md, the devstack plugin)
    data_files=[("etc/driver-kit/rootwrap.d", ["etc/driver-kit/rootwrap.d/driver-kit.filters"])],
    entry_points={
        "console_scripts": ["driver-kit = driver_kit.console:main"],
        "oslo.config.opts": [
            "driver_kit = driver_kit.config:list_opts",
            "lvm_driver = lvm_driver.driver:list_opts",
        ],
        "pytest11": ["driver_kit = driver_kit.compliance.pytest_plugin"],
    },
    classifiers=[
        "Programming Language :: Python :: 3.11",
        "License :: OSI Approved :: Apache Software License",
        "Topic :: System :: Filesystems",
    ],
)
