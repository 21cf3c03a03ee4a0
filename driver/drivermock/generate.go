// Package drivermock holds gomock mocks (go.uber.org/mock) of every
// interface of package driver, so that embedders and vendors can unit-test
// code that uses drivers without a fake or a plugin process.
//
// # Usage
//
//	ctrl := gomock.NewController(t)
//	power := drivermock.NewMockPowerInterface(ctrl)
//	power.EXPECT().GetPowerState(gomock.Any(), gomock.Any()).Return(driver.PowerOn, nil)
//
// The mocks are generated; regenerate them with go generate after an
// interface of package driver changes.
//
// # Mocks or fakes
//
// Prefer the fake implementations (fake-hardware, also served out of
// process by plugins/fake) when a test is about behaviour over time: a
// fake keeps state as a BMC does (power, boot device, in
// driver_internal_info, so it survives a conductor restart), passes the
// driver/drivertest conformance suite, and takes its faults from
// driver_info (fake_fail, fake_delay), so one test runs in process and
// through a plugin alike. Use a mock when the test needs what a fake
// cannot give: a scripted sequence of answers (succeed, then fail, then
// succeed), a typed error with the fields the test chooses
// (*driver.BMCAuthError, *driver.BMCUnreachableError; fake_fail only
// returns driver.ErrInjectedFailure), or proof that a call was made, or
// was not, how often and with which arguments. A mock is as strict as its
// expectations: an unexpected call fails the test, so expect exactly the
// calls the code under test must make. The package examples and
// baremetal/conductor's mock_test.go show both uses.
package drivermock

//go:generate mockgen -destination=mocks.go -package=drivermock github.com/anvilmetal/anvil/driver Interface,PowerInterface,ManagementInterface,BootModeManager,NMIInjector,IndicatorManager,SecureBootManager,SensorReader,VirtualMediaManager,AvailabilityReporter,BootInterface,DeployInterface,StepPreparer,InspectInterface,BIOSInterface,RAIDInterface,ConsoleInterface,VendorInterface,RescueInterface,FirmwareInterface,NetworkInterface,StorageInterface,StepProvider,StepRunner
